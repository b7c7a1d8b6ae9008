/* tests/install/llama_check.c — the bundled LLaMA-style model from an installed StarZeRO
 * (starzero_llama.h, library starzero_llama): a tiny model learns to repeat a fixed sequence.
 * Exits non-zero unless the loss after 40 steps is below half the first step's.  llama-check [steps] */
#include <stdio.h>
#include <stdlib.h>
#include "starzero_llama.h"

enum { B = 2, T = 8, V = 32 };

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    char err[256] = "";
    sz_context *ctx = NULL;
    sz_llama *m = NULL;
    sz_llama_config cfg;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK) {
        fprintf(stderr, "llama-check: cannot start the runtime\n");
        return 1;
    }
    if (sz_llama_config_from_string(&cfg, "2,2,32", V, T, err, sizeof err) != SZ_OK ||
        sz_llama_create(&m, ctx, &cfg, B, T, NULL, err, sizeof err) != SZ_OK || sz_llama_init_random(m, 1) != SZ_OK) {
        fprintf(stderr, "llama-check: %s\n", err);
        sz_context_free(ctx);
        return 1;
    }
    int in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = (i * 7) % V;
        tg[i] = (i * 7 + 7) % V;
    }
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 1e-2f;
    float first = 0, loss = 0;
    int rc = 0;
    for (int s = 1; s <= steps && !rc; s++) {
        if (sz_llama_set_batch(m, in, tg) != SZ_OK || sz_model_train_step(sz_llama_model(m), &tc, s, &loss) != SZ_OK)
            rc = 1;
        if (s == 1)
            first = loss;
    }
    printf("llama: loss %.4f at step 1, %.4f at step %d\n", first, loss, steps);
    if (!rc && !(loss < 0.5f * first))
        rc = 1;
    sz_llama_free(m);
    sz_context_free(ctx);
    return rc;
}

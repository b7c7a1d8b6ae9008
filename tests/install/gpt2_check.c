/* tests/install/gpt2_check.c — compiled against an installed StarZeRO: every public header
 * (starzero_starpu.h needs StarPU's include path from the package) and the GPT-2 library.
 * Prints d12's parameter count and its activation count for B=4, T=64, and exits non-zero
 * unless they are the known figures (124,475,904 parameters; 55,825,152 floats: llm.c's
 * num_activations 73,347,840 less the T x T attention tensors, which StarZeRO does not keep, and
 * less one B x T x Vp tensor, the fused softmax-cross-entropy leaving dlogits in the logits). */
#include <stdio.h>
#include "starzero.h"
#include "starzero_gpt2.h"
#include "starzero_starpu.h"

int main(void)
{
    sz_gpt2_config cfg;
    char err[256];
    if (sz_gpt2_config_from_string(&cfg, "d12", 50257, 1024, err, sizeof err) != SZ_OK) {
        fprintf(stderr, "gpt2-check: %s\n", err);
        return 1;
    }
    size_t params = sz_gpt2_num_params(&cfg);
    double acts = sz_gpt2_activation_bytes(&cfg, 4, 64) / 4.0;
    printf("d12: %zu parameters, %.0f activation floats (B=4, T=64); %s\n", params, acts,
           sz_status_string(SZ_ERR_BUDGET));
    return params == 124475904 && acts == 55825152.0 ? 0 : 1;
}

/* apps/common/ds_config.h — the subset of a DeepSpeed JSON config that maps onto sz-train's
 * options, turned into those options: train_batch_size (--global-batch, a check),
 * train_micro_batch_size_per_gpu (--batch),
 * gradient_accumulation_steps (--micro-batches), gradient_clipping (--grad-clip), optimizer
 * Adam/AdamW (--optimizer adamw) and its params (--lr, --beta1, --beta2, --eps, --wd) or SGD
 * (--optimizer sgd; lr, momentum, weight_decay: --lr, --momentum, --wd), scheduler WarmupLR and
 * WarmupCosineLR (--warmup, --lr-schedule, --min-lr, --steps), bf16.enabled (--precision bf16),
 * zero_optimization.stage (--zero-stage), its reduce_bucket_size, stage3_prefetch_bucket_size
 * and stage3_max_live_parameters (DeepSpeed counts elements; converted to --bucket-bytes,
 * --prefetch-bytes, --max-live-bytes by the element size: 2 bytes under bf16, 4 under fp32), and
 * activation_checkpointing (--checkpoint; cpu_checkpointing: --offload-checkpoints). Every key
 * is reported on `log`: the option and value it became, or why it is ignored. */
#ifndef SZ_APP_DS_CONFIG_H
#define SZ_APP_DS_CONFIG_H

#include <stdio.h>

/* Reads `path` and appends the options it means to *args (strings, NULL-terminated array the
 * caller frees with sz_ds_args_free), in command-line form. argc/argv are the real command line:
 * an option it also gives is reported as overridden (the caller puts the file's options first, so
 * the command line wins). 0, or -1 with err (a file that is not JSON, a key with a value of the
 * wrong type, a setting StarZeRO refuses). */
int sz_ds_config_read(const char *path, int argc, char **argv, char ***args, int *nargs, FILE *log, char *err,
                      size_t errlen);
void sz_ds_args_free(char **args, int nargs);

#endif

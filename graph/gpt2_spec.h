/* graph/gpt2_spec.h — the GPT-2 tensor table; declared in the public header (apps use it too). */
#ifndef SZ_GPT2_SPEC_H
#define SZ_GPT2_SPEC_H
#include "starzero.h"
#endif

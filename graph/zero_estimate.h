/* graph/zero_estimate.h — the ZeRO estimator; declared in the public header (sz-estimate uses it). */
#ifndef SZ_ZERO_ESTIMATE_H
#define SZ_ZERO_ESTIMATE_H
#include "starzero.h"
#endif

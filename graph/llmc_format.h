/* graph/llmc_format.h — the llm.c checkpoint and token formats; declared in the public header (apps use it too). */
#ifndef SZ_LLMC_FORMAT_H
#define SZ_LLMC_FORMAT_H
#include "starzero.h"
#endif

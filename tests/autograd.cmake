# Models written as their forward (include/starzero_starpu.h): the derived backward against hand-written
# ones (bitwise) and finite differences, and its refusals. LLaMA runs on it (test_llama, llama_cli).
sz_test(test_autograd test_autograd.c TIMEOUT 60 LIBS m)

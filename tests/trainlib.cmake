# tests/trainlib.cmake — the training loop as a library (include/starzero_train.h, train/): its
# calls without a model on 1 and 2 ranks (barrier, stop on a signal, the DeepSpeed config, schedule
# names), and the installed example built on it (apps/examples/custom_model.c): learning, saves and
# --keep, SIGTERM and SIGUSR1-to-mpirun stops, bitwise resume, re-sharded resume, refusals.
# Included from tests/CMakeLists.txt.
sz_mpi_exe(test_trainlib test_trainlib.c)
sz_mpi_test(trainlib_np1 test_trainlib 1 TIMEOUT 60 ARGS ${CMAKE_SOURCE_DIR})
sz_mpi_test(trainlib_np2 test_trainlib 2 TIMEOUT 60 ARGS ${CMAKE_SOURCE_DIR})
sz_cli_test(trainlib_cli trainlib_cli.sh 240 MPI)

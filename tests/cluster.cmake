# tests/cluster.cmake — the cluster of network namespaces (scripts/cluster.sh): multi-node runs, their
# faults, and the scheduler. Included (OPTIONAL) from tests/CMakeLists.txt; every test here brings its
# own cluster up under a name of its own and removes it on every exit path; 77 (skipped) where
# network namespaces are not permitted.
sz_cli_test(cluster_train cluster_train.sh 150 MPI)
set_tests_properties(cluster_train PROPERTIES PROCESSORS 2)
sz_cli_test(cluster_faults cluster_faults.sh 150 MPI)
set_tests_properties(cluster_faults PROPERTIES PROCESSORS 2)

# tests/mp_estimate.cmake — sz-estimate's model parallelism (issue 35's estimator): the formulas and
# the models' split by hand (test_mp_estimate, pure arithmetic), and the command line: refusals,
# N_m = 1 byte-identical, the paper's P_a example and Table 3 (mp_estimate_cli).
sz_test(test_mp_estimate test_mp_estimate.c TIMEOUT 30 LIBS sz_appcommon)
sz_cli_test(mp_estimate_cli mp_estimate_cli.sh 60)

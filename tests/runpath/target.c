/* Found only through loader.c's RUNPATH ($ORIGIN/sub). */
int bb_test_target_value(void) { return 42; }

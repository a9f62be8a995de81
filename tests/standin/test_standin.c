#ifdef STANDIN_TEST_MAIN
int main(void) { return 0; }
#else
typedef int standin_test_unused; /* built into the library by the glob: empty */
#endif

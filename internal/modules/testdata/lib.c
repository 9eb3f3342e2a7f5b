/* A shared library for procmaps' dlopen test. */
int stacktop_lib_func(int x) { return 3 * x + 1; }

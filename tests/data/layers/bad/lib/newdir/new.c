/* a folder the rules do not know */
int tk_new(void) { return 0; }

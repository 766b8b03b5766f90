/* the CLI uses only public and internal headers, and only their tk_ functions */
#include "output/internal.h"
int main(void) { return names_intern(); }

/* the recorder may not include a library-private header */
#include "image/elf_phdrs.h"

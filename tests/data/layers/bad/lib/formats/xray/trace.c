/* formats never include each other */
#include "formats/ipt/internal.h"

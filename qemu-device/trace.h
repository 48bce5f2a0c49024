#include "trace/trace-hw_misc_spyre.h"

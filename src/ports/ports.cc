// The ports are interfaces; this file gives the adapters library a translation unit of its own
// so it links while adapters are added.
#include "ports/devices.h"
#include "ports/process.h"
#include "ports/store.h"

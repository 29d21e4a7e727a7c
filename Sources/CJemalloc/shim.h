// jemalloc's public API (Debian: libjemalloc-dev), linked only with the package trait `Jemalloc`.
// Debian's build exports it unprefixed: malloc, free and mallctl are jemalloc's.
#include <jemalloc/jemalloc.h>

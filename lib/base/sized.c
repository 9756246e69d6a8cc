/* SPDX-License-Identifier: MIT */
/*
 * Structs that grow (doc/design.md, "The ABI"): the calls that read or fill
 * a public struct take the size of the struct as the caller's header
 * declared it (the header's macros pass it), so that a release may add
 * fields at a struct's end without a new soname. An older caller's struct
 * ends early: the fields it lacks take their defaults (zero) and are never
 * written. A newer caller's struct is longer: the fields this library does
 * not know must be zero in what it reads, and are zeroed in what it fills.
 */
#include "internal.h"

#include <errno.h>

/* More than any struct of shmcfg will grow to: a size past it is a count
 * or a garbage value, refused before the bytes are scanned or zeroed. */
#define SIZED_MAX 4096

int shmcfg__sized_in(void *dst, size_t full, const void *src, size_t size, size_t min, const char *what)
{
	if (size < min)
		return shmcfg__err(-EINVAL, "%s of %zu bytes: this library reads at least %zu (a header older "
					    "than the library's soname?)", what, size, min);
	if (size > SIZED_MAX)
		return shmcfg__err(-EINVAL, "%s of %zu bytes: more than any struct of shmcfg (%d)", what, size,
				   SIZED_MAX);
	for (size_t i = full; i < size; i++)
		if (((const unsigned char *)src)[i])
			return shmcfg__err(-E2BIG, "%s: byte %zu is set, past the %zu bytes this library (%s) "
						   "knows: link the libshmcfg of the header you built with",
					   what, i, full, SHMCFG_VERSION_STRING);
	memcpy(dst, src, size < full ? size : full);
	if (size < full)
		memset((char *)dst + size, 0, full - size);
	return 0;
}

int shmcfg__sized_out(size_t size, size_t min, const char *what)
{
	if (size < min)
		return shmcfg__err(-EINVAL, "%s of %zu bytes: this library fills at least %zu (a header older "
					    "than the library's soname?)", what, size, min);
	if (size > SIZED_MAX)
		return shmcfg__err(-EINVAL, "%s of %zu bytes: more than any struct of shmcfg (%d)", what, size,
				   SIZED_MAX);
	return 0;
}

void shmcfg__sized_copy(void *dst, size_t size, const void *src, size_t full)
{
	memcpy(dst, src, size < full ? size : full);
	if (size > full)
		memset((char *)dst + full, 0, size - full);
}

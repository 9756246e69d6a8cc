/* SPDX-License-Identifier: MIT */
/*
 * The parts of SHMCFG_DEFINE_OPTIONS (<shmcfg.h>): the accessors it
 * defines and the X-macro columns it reads.
 * Included by <shmcfg.h>: do not include it, nor use what it declares,
 * directly; it is not the API, and changes with SHMCFG_VIEW_ABI and
 * SHMCFG_GEN_ABI.
 */
#ifndef SHMCFG_OPTIONS_H
#define SHMCFG_OPTIONS_H
#ifndef SHMCFG_H
#error "include <shmcfg.h>, not <shmcfg/options.h>"
#endif

#define SHMCFG__ACC_SCALAR(id, T, G)                                          \
	static inline T id(const shmcfg *h)                                   \
	{                                                                     \
		T _v = 0;                                                     \
		return G(h, id##_opt, &_v) == 0 ? _v : (T)0;                  \
	}                                                                     \
	static inline int id##_get(const shmcfg *h, T *ret)                  \
	{                                                                     \
		return G(h, id##_opt, ret);                                   \
	}
#define SHMCFG__ACC_COPY(id)                                                  \
	static inline int id(const shmcfg *h, shmcfg_value *ret)              \
	{                                                                     \
		return shmcfg_get(h, id##_opt, ret);                          \
	}
#define SHMCFG__ACC_BOOL(id) SHMCFG__ACC_SCALAR(id, bool, shmcfg_get_bool)
#define SHMCFG__ACC_INT(id) SHMCFG__ACC_SCALAR(id, int64_t, shmcfg_get_int)
#define SHMCFG__ACC_FLOAT(id) SHMCFG__ACC_SCALAR(id, double, shmcfg_get_float)
#define SHMCFG__ACC_STR(id) SHMCFG__ACC_COPY(id)
#define SHMCFG__ACC_LIST(id) SHMCFG__ACC_COPY(id)
#define SHMCFG__ACC_SET(id) SHMCFG__ACC_COPY(id)
#define SHMCFG__X_ENUM(id, nm, ty, ...) id##_opt,
#define SHMCFG__X_ACC(id, nm, ty, ...) SHMCFG__ACC_##ty(id)
#define SHMCFG__X_DEF(id, nm, ty, ...) {.name = nm, .type = SHMCFG_##ty, __VA_ARGS__},
#define SHMCFG__X_NAME(id, nm, ty, ...) nm,
#define SHMCFG__X_TYPE(id, nm, ty, ...) SHMCFG_##ty,

#endif /* SHMCFG_OPTIONS_H */

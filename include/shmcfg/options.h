/* SPDX-License-Identifier: MIT */
/*
 * Compile-time option handles and their accessors: the one definition that
 * SHMCFG_DEFINE_OPTIONS (<shmcfg.h>) and the headers `shmctl header`
 * generates both expand, and the X-macro columns they read.
 * Included by <shmcfg.h>: do not include it, nor use what it declares,
 * directly; it is not the API, and changes with SHMCFG_VIEW_ABI and
 * SHMCFG_GEN_ABI.
 */
#ifndef SHMCFG_OPTIONS_H
#define SHMCFG_OPTIONS_H
#ifndef SHMCFG_H
#error "include <shmcfg.h>, not <shmcfg/options.h>"
#endif

/* A handle: the constant id_opt, the option's declaration index, which the
 * accessors below read. What makes it safe differs: prefix_verify() checks
 * names and types at run time; a generated header's hash proves them (and
 * nullability) at attach. */
#define SHMCFG__HANDLE(id) id##_opt

/* Per scalar type: its C type, its checked getter, its bits as the value
 * and the cold slow paths of the proven reads (shmcfg/proven.h). */
#define SHMCFG__T_BOOL bool
#define SHMCFG__T_INT int64_t
#define SHMCFG__T_FLOAT double
#define SHMCFG__GET_BOOL shmcfg_get_bool
#define SHMCFG__GET_INT shmcfg_get_int
#define SHMCFG__GET_FLOAT shmcfg_get_float
#define SHMCFG__VAL_BOOL(b) ((b) != 0)
#define SHMCFG__VAL_INT(b) ((int64_t)(b))
#define SHMCFG__VAL_FLOAT(b) shmcfg__f64(b)
#define SHMCFG__SLOW_BOOL shmcfg__proven_slow_bool
#define SHMCFG__SLOW_INT shmcfg__proven_slow_int
#define SHMCFG__SLOW_FLOAT shmcfg__proven_slow_float

/*
 * The accessors, in two variants that differ in what proves the handle and
 * so in what a failed read returns:
 *  - checked (SHMCFG_DEFINE_OPTIONS): the inline getter checks handle, type
 *    and null on every read; `T id(h)` is 0/false when null or on error,
 *    `int id_get(h, T *ret)` the getter's code; str, list and set options
 *    get `int id(h, shmcfg_value *ret)`, a copying read;
 *  - proven (`shmctl header`): the schema hash proved handle, type and
 *    nullability; `T id(h)` is the value or, if the read fails, the schema
 *    default @p def; a nullable option has `int id(h, T *ret)` instead (0,
 *    SHMCFG_NULL or an error); str, list and set options get no accessor.
 */
#define SHMCFG__ACC_SCALAR(id, TY)                                              \
	static inline SHMCFG__T_##TY id(const shmcfg *_h)                        \
	{                                                                       \
		SHMCFG__T_##TY _v = 0;                                          \
		return SHMCFG__GET_##TY(_h, SHMCFG__HANDLE(id), &_v) == 0 ? _v : (SHMCFG__T_##TY)0; \
	}                                                                       \
	static inline int id##_get(const shmcfg *_h, SHMCFG__T_##TY *_ret)        \
	{                                                                       \
		return SHMCFG__GET_##TY(_h, SHMCFG__HANDLE(id), _ret);            \
	}
#define SHMCFG__ACC_COPY(id)                                                    \
	static inline int id(const shmcfg *_h, shmcfg_value *_ret)                \
	{                                                                       \
		return shmcfg_get(_h, SHMCFG__HANDLE(id), _ret);                  \
	}
#define SHMCFG__ACC_BOOL(id) SHMCFG__ACC_SCALAR(id, BOOL)
#define SHMCFG__ACC_INT(id) SHMCFG__ACC_SCALAR(id, INT)
#define SHMCFG__ACC_FLOAT(id) SHMCFG__ACC_SCALAR(id, FLOAT)
#define SHMCFG__ACC_STR(id) SHMCFG__ACC_COPY(id)
#define SHMCFG__ACC_LIST(id) SHMCFG__ACC_COPY(id)
#define SHMCFG__ACC_SET(id) SHMCFG__ACC_COPY(id)

/* proven, not nullable (0) and nullable (1) */
#define SHMCFG__ACC_PROVEN_0(id, TY, def)                                       \
	static inline SHMCFG__T_##TY id(const shmcfg *_h)                        \
	{                                                                       \
		uint64_t _bits;                                                  \
		if (__builtin_expect(shmcfg__read_proven(_h, SHMCFG__HANDLE(id), &_bits), 1)) \
			return SHMCFG__VAL_##TY(_bits);                          \
		return SHMCFG__SLOW_##TY(_h, SHMCFG__HANDLE(id), def);           \
	}
#define SHMCFG__ACC_PROVEN_1(id, TY, def)                                       \
	static inline int id(const shmcfg *_h, SHMCFG__T_##TY *_ret)              \
	{                                                                       \
		uint64_t _bits;                                                  \
		int _r = shmcfg__read_proven_nullable(_h, SHMCFG__HANDLE(id), &_bits); \
		if (__builtin_expect(_r < 0, 0))                                 \
			return SHMCFG__SLOW_##TY##_n(_h, SHMCFG__HANDLE(id), _ret); \
		if (_r == 0)                                                     \
			*_ret = SHMCFG__VAL_##TY(_bits);                          \
		return _r;                                                       \
	}
#define SHMCFG__SLOW_BOOL_n shmcfg__proven_slow_bool_n
#define SHMCFG__SLOW_INT_n shmcfg__proven_slow_int_n
#define SHMCFG__SLOW_FLOAT_n shmcfg__proven_slow_float_n
#define SHMCFG__PROVEN_BOOL(id, nl, def) SHMCFG__ACC_PROVEN_##nl(id, BOOL, def)
#define SHMCFG__PROVEN_INT(id, nl, def) SHMCFG__ACC_PROVEN_##nl(id, INT, def)
#define SHMCFG__PROVEN_FLOAT(id, nl, def) SHMCFG__ACC_PROVEN_##nl(id, FLOAT, def)
#define SHMCFG__PROVEN_STR(id, nl, def)
#define SHMCFG__PROVEN_LIST(id, nl, def)
#define SHMCFG__PROVEN_SET(id, nl, def)

/*
 * The columns. SHMCFG_DEFINE_OPTIONS's list: X(id, "name", TYPE, optdef
 * designators...), handles numbered in list order. A generated header's
 * P_OPTIONS(X) has, in place of the designators (its schema is the
 * segment's), the columns the hash gives: X(id, "name", TYPE, nullable,
 * default), nullable 0 or 1 and default a C expression of the schema
 * default; its handles are numbered by the header (it may hold some of the
 * schema's options), with the names SHMCFG__HANDLE gives.
 */
#define SHMCFG__X_ENUM(id, nm, ty, ...) SHMCFG__HANDLE(id),
#define SHMCFG__X_ACC(id, nm, ty, ...) SHMCFG__ACC_##ty(id)
#define SHMCFG__X_DEF(id, nm, ty, ...) {.name = nm, .type = SHMCFG_##ty, __VA_ARGS__},
#define SHMCFG__X_NAME(id, nm, ty, ...) nm,
#define SHMCFG__X_TYPE(id, nm, ty, ...) SHMCFG_##ty,
#define SHMCFG__X_PROVEN_ACC(id, nm, ty, nl, def) SHMCFG__PROVEN_##ty(id, nl, def)

#endif /* SHMCFG_OPTIONS_H */

/* SPDX-License-Identifier: MIT */
/*
 * shmcfg._fast: the attribute read of a config module in C (optional; the
 * package falls back to its ctypes getters without it, python/README.md).
 *
 * One Getter per option is a data descriptor on the module's class, where
 * the ctypes binding puts a property. Its read is the Python getter's
 * (segment.py, Segment._getter) without the Python frame: while nothing
 * asks for the slow path, it loads the word `current` its view names and
 * returns the value it cached under that word (a published generation
 * never changes); otherwise it reads the option through libshmcfg (the
 * inline getters of shmcfg.h for bool/int/float, shmcfg_get() for the
 * rest), caches it and returns it.
 *
 * A patch open in some thread (the low bits of the segment's state word,
 * Segment._state[0], count them) leaves the cache to the threads without
 * patches: a thread with patches (the library's shmcfg__tls_patched)
 * reads through the library, which applies its patches, and keeps what it
 * read in a second entry, under the word `current` and the number the
 * library gives the thread's frames as they are (shmcfg__tls_patch_id: new
 * at each change of any thread's frames, so that it names one thread's).
 *
 * Policy stays in Python: the Getter calls its `fallback` (the Python
 * getter) whenever
 *  - a flag bit of the state word is set: the handle was closed or replaced
 *    by reattach(), or reads must call the library (fast_reads=False);
 *  - the Python layer set the Getter's `slow` flag (a name hidden by
 *    mock.patch's delattr, a deprecated option that warns...);
 *  - the library read fails (the fallback raises the binding's exception).
 * All of it runs under the GIL, which serialises the cache's updates.
 *
 * A Patch is the enter and exit of config.patch() (config.py, _FastPatch):
 * one library frame pushed and set, or popped, and the state word's count
 * moved, in one call each. Its values were converted by the Python layer
 * when the patch was made; the library checks them at each enter, as
 * before. Whatever is not the common case (a closed or replaced handle, a
 * refused value) goes to the Python layer's enter or exit, which raises
 * the binding's exception.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "shmcfg.h"

typedef struct {
	PyObject_HEAD
	const shmcfg *h;          /* the segment's handle (valid while no flag bit of state is set) */
	const uint64_t *const *current; /* the view's pointer to the word `current` */
	PyObject *state;          /* Segment._state: a list of one int, the state word */
	PyObject *fallback;       /* the Python getter: fallback(module) -> value */
	PyObject *doc;
	PyObject *copy;           /* NULL, or copy(frozen) -> what a list/set read returns */
	shmcfg_opt opt;
	int kind;                 /* enum shmcfg_type */
	int slow;                 /* set by the Python layer: always call fallback */
	uint64_t cached_cur;      /* the `current` word the cached value was read under */
	PyObject *cached;         /* NULL, or the value (tuple/frozenset for list/set) */
	uint64_t pcached_cur;     /* the same of the patched thread that read last: */
	uint64_t pcached_id;      /* its shmcfg__tls_patch_id, */
	PyObject *pcached;        /* NULL, or the value it read */
} Getter;

static PyObject *zero; /* the int 0 (a cached small int in CPython) */
static PyObject *empty_str; /* "" */

/* The bits of Segment._state[0] (segment.py): below STATE_FLAGS, the count
 * of patches open in the process; from it up, reasons for the slow path. */
#define STATE_FLAGS (1LL << 40)
#define STATE_CLOSED (1LL << 41)
#define STATE_STALE (1LL << 42)

/* The state word of list state, or -1 if it is not one plain int (then the
 * slow path decides). */
static long long state_word(PyObject *state)
{
	if (PyList_GET_SIZE(state) != 1)
		return -1;
	PyObject *w = PyList_GET_ITEM(state, 0);
	if (w == zero)
		return 0;
	if (!PyLong_CheckExact(w))
		return -1;
	long long v = PyLong_AsLongLong(w);
	if (v == -1 && PyErr_Occurred()) {
		PyErr_Clear();
		return -1;
	}
	return v;
}

/* A Getter or Patch made by __new__ without __init__ (or cleared by the
 * collector) has no state: using it raises, never reads through NULL. */
static int unready(const PyObject *state, const char *type)
{
	if (state)
		return 0;
	PyErr_Format(PyExc_TypeError, "%s was not initialised (made by __new__ without __init__)", type);
	return -1;
}

/* Add d to the state word: one step under the GIL, so that it needs no
 * lock against the other steps (state_add(), state_or(), a Patch's enter
 * and exit). */
static int state_add(PyObject *state, long long d)
{
	long long v = state_word(state);
	if (v < 0) {
		PyErr_SetString(PyExc_RuntimeError, "shmcfg._fast: bad state word");
		return -1;
	}
	PyObject *w = PyLong_FromLongLong(v + d);
	if (!w)
		return -1;
	PyList_SetItem(state, 0, w); /* steals w; the old word has no finaliser */
	return 0;
}

/* A Python value of an option of type kind read through the library, or
 * NULL with no exception set when the read failed (the fallback says why). */
static PyObject *read_value(const Getter *g)
{
	int r;
	switch (g->kind) {
	case SHMCFG_BOOL: {
		bool b;
		r = shmcfg_get_bool(g->h, g->opt, &b);
		if (r == 0)
			return PyBool_FromLong(b);
		break;
	}
	case SHMCFG_INT: {
		int64_t i;
		r = shmcfg_get_int(g->h, g->opt, &i);
		if (r == 0)
			return PyLong_FromLongLong(i);
		break;
	}
	case SHMCFG_FLOAT: {
		double f;
		r = shmcfg_get_float(g->h, g->opt, &f);
		if (r == 0)
			return PyFloat_FromDouble(f);
		break;
	}
	default: {
		shmcfg_value v = {0};
		r = shmcfg_get(g->h, g->opt, &v);
		if (r != 0 || (int)v.type != g->kind) {
			shmcfg_value_clear(&v);
			return NULL;
		}
		PyObject *out = NULL;
		if (v.is_null) {
			out = Py_NewRef(Py_None);
		} else if (g->kind == SHMCFG_STR) {
			out = PyUnicode_DecodeUTF8(v.u.str.ptr, (Py_ssize_t)v.u.str.len, NULL);
		} else {
			/* list and set: NUL-terminated items, back to back; kept
			 * frozen (tuple, frozenset), each read hands out a copy */
			out = PyTuple_New((Py_ssize_t)v.u.list.count);
			const char *p = v.u.list.items, *end = p + v.u.list.bytes;
			for (size_t i = 0; out && i < v.u.list.count; i++) {
				size_t n = p < end ? strnlen(p, (size_t)(end - p)) : 0;
				PyObject *s = p + n < end ? PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, NULL) : NULL;
				if (!s) {
					Py_CLEAR(out);
					break;
				}
				PyTuple_SET_ITEM(out, (Py_ssize_t)i, s);
				p += n + 1;
			}
			if (out && g->kind == SHMCFG_SET)
				Py_SETREF(out, PyFrozenSet_New(out));
		}
		shmcfg_value_clear(&v);
		if (!out)
			PyErr_Clear(); /* a bad text: the fallback raises the binding's error */
		return out;
	}
	}
	if (r == SHMCFG_NULL)
		return Py_NewRef(Py_None);
	return NULL;
}

/* What a read hands out: the cached object itself when it is immutable; for
 * a container option a fresh copy, made by the Python layer's copy when it
 * gave one (its in-place change policy), else a plain list or set. */
static PyObject *hand_out(const Getter *g, PyObject *v)
{
	if (v == Py_None || g->kind < SHMCFG_LIST)
		return Py_NewRef(v);
	if (g->copy) {
		/* copy() may let another thread replace the cached value: hold it */
		Py_INCREF(v);
		PyObject *out = PyObject_CallOneArg(g->copy, v);
		Py_DECREF(v);
		return out;
	}
	return g->kind == SHMCFG_LIST ? PySequence_List(v) : PySet_New(v);
}

static PyObject *Getter_get(PyObject *self, PyObject *obj, PyObject *type)
{
	Getter *g = (Getter *)self;
	if (obj == NULL || obj == Py_None)
		return Py_NewRef(self);
	if (unready(g->state, "shmcfg._fast.Getter"))
		return NULL;
	if (g->slow)
		return PyObject_CallOneArg(g->fallback, obj);
	if (PyList_GET_SIZE(g->state) != 1 || PyList_GET_ITEM(g->state, 0) != zero) {
		long long st = state_word(g->state);
		if (st < 0 || st >= STATE_FLAGS)
			return PyObject_CallOneArg(g->fallback, obj);
		/* patches are open: this thread's own, if any, are in what the
		 * library reads, kept in the second entry under the number of
		 * the thread's frames as they are (new at each change of any
		 * thread's: it names this thread's); another thread's leave
		 * this one to the first entry */
		if (shmcfg__tls_patched) {
			uint64_t id = shmcfg__tls_patch_id;
			uint64_t cur = __atomic_load_n(__atomic_load_n(g->current, __ATOMIC_RELAXED),
						       __ATOMIC_ACQUIRE);
			if (g->pcached && id && id == g->pcached_id && cur == g->pcached_cur)
				return hand_out(g, g->pcached);
			PyObject *v = read_value(g);
			if (!v)
				return PyObject_CallOneArg(g->fallback, obj);
			if (id && (cur & 0xff) != 0xff) { /* as below */
				Py_XSETREF(g->pcached, Py_NewRef(v));
				g->pcached_id = id;
				g->pcached_cur = cur;
			}
			PyObject *out = hand_out(g, v);
			Py_DECREF(v);
			return out;
		}
	}
	/* Pairs with the writer's seq_cst store of `current` (lib/commit/publish.c):
	 * the word is read before the library read, so a commit racing it can
	 * only make the cached entry unused, never wrong. */
	uint64_t cur = __atomic_load_n(__atomic_load_n(g->current, __ATOMIC_RELAXED), __ATOMIC_ACQUIRE);
	if (g->cached && cur == g->cached_cur)
		return hand_out(g, g->cached);
	PyObject *v = read_value(g);
	if (!v)
		return PyObject_CallOneArg(g->fallback, obj);
	/* a replaced segment's word names slot 0xff (FROZEN_SLOT, lib/read/seqlock.h):
	 * the library read followed the new segment, whose word the view names
	 * now; nothing is cached under the old one */
	if ((cur & 0xff) == 0xff) {
		PyObject *out = hand_out(g, v);
		Py_DECREF(v);
		return out;
	}
	Py_XSETREF(g->cached, v);
	g->cached_cur = cur;
	return hand_out(g, v);
}

static int Getter_set(PyObject *self, PyObject *obj, PyObject *value)
{
	/* ConfigModule.__setattr__ commits assignments; only a direct
	 * object.__setattr__ gets here */
	PyErr_SetString(PyExc_AttributeError, "shmcfg: assign options through the config module");
	return -1;
}

static int Getter_init(PyObject *self, PyObject *args, PyObject *kw)
{
	Getter *g = (Getter *)self;
	static char *names[] = {"handle", "current", "state", "fallback", "opt", "kind", "doc",
				"copy", NULL};
	unsigned long long h, current;
	unsigned int opt;
	int kind;
	PyObject *state, *fallback, *doc = Py_None, *copy = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "KKO!OIi|OO", names, &h, &current,
					 &PyList_Type, &state, &fallback, &opt, &kind, &doc, &copy))
		return -1;
	if (!h || !current || PyList_GET_SIZE(state) != 1 || !PyCallable_Check(fallback) ||
	    kind < SHMCFG_BOOL || kind > SHMCFG_SET ||
	    (copy != Py_None && (!PyCallable_Check(copy) || kind < SHMCFG_LIST))) {
		PyErr_SetString(PyExc_ValueError, "shmcfg._fast.Getter: bad arguments");
		return -1;
	}
	g->h = (const shmcfg *)(uintptr_t)h;
	g->current = (const uint64_t *const *)(uintptr_t)current;
	Py_XSETREF(g->state, Py_NewRef(state));
	Py_XSETREF(g->fallback, Py_NewRef(fallback));
	Py_XSETREF(g->doc, Py_NewRef(doc));
	Py_XSETREF(g->copy, copy == Py_None ? NULL : Py_NewRef(copy));
	Py_CLEAR(g->cached);
	Py_CLEAR(g->pcached);
	g->opt = opt;
	g->kind = kind;
	g->slow = 0;
	return 0;
}

static int Getter_traverse(PyObject *self, visitproc visit, void *arg)
{
	Getter *g = (Getter *)self;
	Py_VISIT(g->state);
	Py_VISIT(g->fallback);
	Py_VISIT(g->doc);
	Py_VISIT(g->copy);
	Py_VISIT(g->cached);
	Py_VISIT(g->pcached);
	return 0;
}

static int Getter_clear(PyObject *self)
{
	Getter *g = (Getter *)self;
	Py_CLEAR(g->state);
	Py_CLEAR(g->fallback);
	Py_CLEAR(g->doc);
	Py_CLEAR(g->copy);
	Py_CLEAR(g->cached);
	Py_CLEAR(g->pcached);
	return 0;
}

static void Getter_dealloc(PyObject *self)
{
	PyObject_GC_UnTrack(self);
	Getter_clear(self);
	Py_TYPE(self)->tp_free(self);
}

static PyMemberDef Getter_members[] = {
	{"slow", T_INT, offsetof(Getter, slow), 0,
	 "non-zero: every read calls the fallback (the Python layer's policy)"},
	{"fallback", T_OBJECT, offsetof(Getter, fallback), READONLY, "the Python getter"},
	{"__doc__", T_OBJECT, offsetof(Getter, doc), READONLY, NULL},
	{NULL}
};

static PyTypeObject GetterType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmcfg._fast.Getter",
	.tp_doc = "Getter(handle, current, state, fallback, opt, kind, doc=None, copy=None): "
		  "the C read of one option, a data descriptor",
	.tp_basicsize = sizeof(Getter),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_new = PyType_GenericNew,
	.tp_init = Getter_init,
	.tp_dealloc = Getter_dealloc,
	.tp_traverse = Getter_traverse,
	.tp_clear = Getter_clear,
	.tp_descr_get = Getter_get,
	.tp_descr_set = Getter_set,
	.tp_members = Getter_members,
};

typedef struct {
	PyObject_HEAD
	shmcfg *h;          /* the segment's handle (valid while state has no flag bit of CLOSED, STALE) */
	PyObject *state;    /* Segment._state */
	PyObject *pairs;    /* the Python layer's (option, converted value) pairs: own the values */
	PyObject *enter;    /* the Python enter: enter(pairs, owner) pushes and raises as the binding does */
	PyObject *exit;     /* the Python exit: exit(owner) */
	PyObject *dict;     /* a subclass's attributes (changes) */
	Py_ssize_t n;
	shmcfg_opt *opts;
	const shmcfg_value **vals; /* the pairs' values, owned by pairs */
} Patch;

/* The Python enter or exit, given the patch's id() as its frame's owner,
 * as the C enter and exit name it (the patch object itself). */
static PyObject *Patch_fallback(Patch *p, PyObject *fn, PyObject *pairs)
{
	PyObject *owner = PyLong_FromVoidPtr(p);
	if (!owner)
		return NULL;
	PyObject *r = pairs ? PyObject_CallFunctionObjArgs(fn, pairs, owner, NULL) : PyObject_CallOneArg(fn, owner);
	Py_DECREF(owner);
	return r;
}

static PyObject *Patch_enter(PyObject *self, PyObject *unused)
{
	Patch *p = (Patch *)self;
	if (unready(p->state, "shmcfg._fast.Patch"))
		return NULL;
	long long st = state_word(p->state);
	if (st < 0 || (st & (STATE_CLOSED | STATE_STALE)))
		return Patch_fallback(p, p->enter, p->pairs);
	/* the frame is the patch's, closed by it wherever it is: patches may
	 * end out of order (two generators, an ExitStack) */
	if (shmcfg_patch_enter(p->h, p) != 0)
		return Patch_fallback(p, p->enter, p->pairs);
	for (Py_ssize_t i = 0; i < p->n; i++)
		if (shmcfg_patch_set(p->h, p->opts[i], p->vals[i]) != 0) {
			/* refused: leave as before, and let the Python enter
			 * refuse it again with the binding's exception */
			(void)shmcfg_patch_exit(p->h, p);
			return Patch_fallback(p, p->enter, p->pairs);
		}
	if (state_add(p->state, 1) < 0) {
		(void)shmcfg_patch_exit(p->h, p);
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *Patch_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	Patch *p = (Patch *)self;
	if (unready(p->state, "shmcfg._fast.Patch"))
		return NULL;
	long long st = state_word(p->state);
	if (st < 0 || (st & (STATE_CLOSED | STATE_STALE)) || shmcfg_patch_exit(p->h, p) != 0) {
		/* the Python exit raises why (a closed segment, a patch
		 * not open in this thread) */
		PyObject *r = Patch_fallback(p, p->exit, NULL);
		if (!r)
			return NULL;
		Py_DECREF(r);
		Py_RETURN_NONE;
	}
	if (state_add(p->state, -1) < 0)
		return NULL;
	Py_RETURN_NONE; /* exceptions inside go on */
}

static int Patch_init(PyObject *self, PyObject *args, PyObject *kw)
{
	Patch *p = (Patch *)self;
	static char *names[] = {"handle", "state", "pairs", "opts", "values", "enter", "exit", NULL};
	unsigned long long h;
	PyObject *state, *pairs, *opts, *vals, *enter, *exit;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "KO!OO!O!OO", names, &h, &PyList_Type, &state,
					 &pairs, &PyTuple_Type, &opts, &PyTuple_Type, &vals, &enter,
					 &exit))
		return -1;
	Py_ssize_t n = PyTuple_GET_SIZE(opts);
	if (!h || PyList_GET_SIZE(state) != 1 || PyTuple_GET_SIZE(vals) != n ||
	    !PyCallable_Check(enter) || !PyCallable_Check(exit) || p->opts) {
		PyErr_SetString(PyExc_ValueError, "shmcfg._fast.Patch: bad arguments");
		return -1;
	}
	shmcfg_opt *o = PyMem_Calloc(n ? (size_t)n : 1, sizeof *o);
	const shmcfg_value **v = PyMem_Calloc(n ? (size_t)n : 1, sizeof *v);
	if (!o || !v) {
		PyMem_Free(o);
		PyMem_Free(v);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		unsigned long opt = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(opts, i));
		void *addr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(vals, i));
		if (PyErr_Occurred() || !addr) {
			PyMem_Free(o);
			PyMem_Free(v);
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "shmcfg._fast.Patch: bad arguments");
			return -1;
		}
		o[i] = (shmcfg_opt)opt;
		v[i] = addr;
	}
	p->h = (shmcfg *)(uintptr_t)h;
	p->n = n;
	p->opts = o;
	p->vals = v;
	Py_XSETREF(p->state, Py_NewRef(state));
	Py_XSETREF(p->pairs, Py_NewRef(pairs));
	Py_XSETREF(p->enter, Py_NewRef(enter));
	Py_XSETREF(p->exit, Py_NewRef(exit));
	return 0;
}

static int Patch_traverse(PyObject *self, visitproc visit, void *arg)
{
	Patch *p = (Patch *)self;
	Py_VISIT(p->state);
	Py_VISIT(p->pairs);
	Py_VISIT(p->enter);
	Py_VISIT(p->exit);
	Py_VISIT(p->dict);
	return 0; /* a heap subclass's type: its subtype_traverse visits it */
}

static int Patch_clear(PyObject *self)
{
	Patch *p = (Patch *)self;
	Py_CLEAR(p->state);
	Py_CLEAR(p->pairs);
	Py_CLEAR(p->enter);
	Py_CLEAR(p->exit);
	Py_CLEAR(p->dict);
	return 0;
}

static void Patch_dealloc(PyObject *self)
{
	Patch *p = (Patch *)self;
	PyObject_GC_UnTrack(self);
	Patch_clear(self);
	PyMem_Free(p->opts);
	PyMem_Free(p->vals);
	/* a heap subclass's type: its subtype_dealloc drops the reference */
	Py_TYPE(self)->tp_free(self);
}

static PyMethodDef Patch_methods[] = {
	{"__enter__", Patch_enter, METH_NOARGS, "open the patch in the calling thread"},
	{"__exit__", (PyCFunction)(void (*)(void))Patch_exit, METH_FASTCALL,
	 "close the calling thread's innermost patch"},
	{NULL}
};

static PyTypeObject PatchType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmcfg._fast.Patch",
	.tp_doc = "Patch(handle, state, pairs, opts, values, enter, exit): the enter and exit "
		  "of config.patch() in C (a base class)",
	.tp_basicsize = sizeof(Patch),
	.tp_dictoffset = offsetof(Patch, dict),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
	.tp_new = PyType_GenericNew,
	.tp_init = Patch_init,
	.tp_dealloc = Patch_dealloc,
	.tp_traverse = Patch_traverse,
	.tp_clear = Patch_clear,
	.tp_methods = Patch_methods,
};

/* state_add(state, d): add d to the state word in one step (the Python
 * layer's patch counts, next to those of Patch). */
static PyObject *state_add_py(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
	long long d;
	if (nargs != 2 || !PyList_Check(args[0]) || PyList_GET_SIZE(args[0]) != 1) {
		PyErr_SetString(PyExc_TypeError, "state_add(state, delta)");
		return NULL;
	}
	d = PyLong_AsLongLong(args[1]);
	if (d == -1 && PyErr_Occurred())
		return NULL;
	if (state_add(args[0], d) < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* state_or(state, bits): set bits of the state word in one step. */
static PyObject *state_or_py(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
	long long bits, v;
	if (nargs != 2 || !PyList_Check(args[0]) || PyList_GET_SIZE(args[0]) != 1) {
		PyErr_SetString(PyExc_TypeError, "state_or(state, bits)");
		return NULL;
	}
	bits = PyLong_AsLongLong(args[1]);
	if (bits == -1 && PyErr_Occurred())
		return NULL;
	if ((v = state_word(args[0])) < 0) {
		PyErr_SetString(PyExc_RuntimeError, "shmcfg._fast: bad state word");
		return NULL;
	}
	if (state_add(args[0], (v | bits) - v) < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* snapshot_release(box): release the snapshot whose pointer the ctypes
 * c_void_p box holds, and clear the box, in one step: no exception
 * (KeyboardInterrupt) comes between the two (segment.py, _release_snapshot). */
static PyObject *snapshot_release_py(PyObject *mod, PyObject *box)
{
	Py_buffer b;
	if (PyObject_GetBuffer(box, &b, PyBUF_WRITABLE) < 0)
		return NULL;
	if (b.len != (Py_ssize_t)sizeof(shmcfg_snapshot *)) {
		PyBuffer_Release(&b);
		PyErr_SetString(PyExc_TypeError, "snapshot_release(box): box must be a ctypes.c_void_p");
		return NULL;
	}
	shmcfg_snapshot *s;
	memcpy(&s, b.buf, sizeof s);
	memset(b.buf, 0, sizeof s);
	PyBuffer_Release(&b);
	shmcfg_snapshot_release(s);
	Py_RETURN_NONE;
}

/* Interned attribute names of Segment's option records (values._Opt). */
static PyObject *opt_attr[10];
static const char *const opt_attr_names[10] = {"name", "opt", "kind", "flags", "nullable",
					       "alias", "final", "doc", "deprecated", "knob"};

/* A string of the library's in UTF-8, undecodable bytes replaced; NULL
 * gives `none` (a new reference). */
static PyObject *text_or(const char *s, PyObject *none)
{
	if (!s)
		return Py_NewRef(none);
	return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* One option record: cls() with its ten attributes from shmcfg_opt_info(),
 * as Segment._load_options() makes it in Python, set through cls's
 * descriptors of them (set[k], its __slots__'), and its name in *name (a
 * new reference); NULL with an exception. */
static PyObject *option_record(PyObject *cls, PyObject *const set[10], shmcfg_opt i, const shmcfg_optinfo *info,
				PyObject **name)
{
	PyObject *o = PyObject_CallNoArgs(cls);
	if (!o)
		return NULL;
	PyObject *v[10] = {
		PyUnicode_DecodeUTF8(info->name, (Py_ssize_t)strlen(info->name), NULL),
		PyLong_FromUnsignedLong(i),
		PyLong_FromLong(info->type),
		PyLong_FromUnsignedLong(info->flags),
		PyBool_FromLong((info->flags & SHMCFG_F_NULLABLE) != 0),
		info->alias != SHMCFG_NO_OPT ? PyLong_FromUnsignedLong(info->alias) : Py_NewRef(Py_None),
		PyLong_FromUnsignedLong(info->alias_final),
		text_or(info->doc && *info->doc ? info->doc : NULL, empty_str),
		text_or(info->deprecated, Py_None),
		text_or(info->knob, Py_None),
	};
	int bad = 0;
	for (int k = 0; k < 10; k++)
		if (!bad && (!v[k] || Py_TYPE(set[k])->tp_descr_set(set[k], o, v[k]) < 0))
			bad = 1;
	*name = bad ? NULL : Py_NewRef(v[0]);
	for (int k = 0; k < 10; k++)
		Py_XDECREF(v[k]);
	if (bad)
		Py_CLEAR(o);
	return o;
}

/* options(handle, cls): every option's record, as (list by index, dict by
 * name), in one call (100,000 options: ~4x the ctypes loop's speed); or
 * the library's negative error code, for the caller to raise with its
 * detail (shmcfg_errdetail(), which this call leaves as the library set it). */
static PyObject *options_py(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 2 || !PyType_Check(args[1])) {
		PyErr_SetString(PyExc_TypeError, "options(handle, cls)");
		return NULL;
	}
	const shmcfg *h = PyLong_AsVoidPtr(args[0]);
	if (!h) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError, "options(handle, cls): a NULL handle");
		return NULL;
	}
	/* the descriptors that set each attribute (cls's slots): no lookup
	 * of the name in cls per attribute */
	PyObject *set[10] = {NULL}, *byindex = NULL, *byname = NULL, *ret = NULL;
	for (int k = 0; k < 10; k++)
		if (!(set[k] = PyObject_GetAttr(args[1], opt_attr[k])))
			goto out;
		else if (!Py_TYPE(set[k])->tp_descr_set) {
			PyErr_Format(PyExc_TypeError, "options(): %R has no slot %U", args[1], opt_attr[k]);
			goto out;
		}
	uint32_t n = shmcfg_count(h);
	if (!(byindex = PyList_New(n)) || !(byname = PyDict_New()))
		goto out;
	/* no collection while 100,000 records are made: they hold no cycle,
	 * and the young generation's collections cost a third of the time */
	int gc_was = PyGC_Disable();
	uint32_t i;
	for (i = 0; i < n; i++) {
		shmcfg_optinfo info;
		int r = shmcfg_opt_info(h, i, &info);
		if (r < 0) {
			ret = PyLong_FromLong(r);
			break;
		}
		PyObject *name, *o = option_record(args[1], set, i, &info, &name);
		if (!o)
			break;
		PyList_SET_ITEM(byindex, i, o); /* steals o */
		int r2 = PyDict_SetItem(byname, name, o);
		Py_DECREF(name);
		if (r2 < 0)
			break;
	}
	if (gc_was)
		PyGC_Enable();
	if (i == n)
		ret = PyTuple_Pack(2, byindex, byname);
out:
	for (int k = 0; k < 10; k++)
		Py_XDECREF(set[k]);
	Py_XDECREF(byindex);
	Py_XDECREF(byname);
	return ret;
}

/* Whether the calling thread has a patch open (of any handle). */
static PyObject *thread_patched(PyObject *mod, PyObject *unused)
{
	return PyBool_FromLong(shmcfg__tls_patched != 0);
}

/* The address of the shmcfg_get this module calls: the package compares it
 * with the library it loaded through ctypes, and uses the module only when
 * both are one library (a handle of one copy means nothing to another). */
static PyObject *library_address(PyObject *mod, PyObject *unused)
{
	return PyLong_FromVoidPtr((void *)(uintptr_t)&shmcfg_get);
}

static PyMethodDef fast_methods[] = {
	{"library_address", library_address, METH_NOARGS,
	 "the address of shmcfg_get() in the libshmcfg this module is linked with"},
	{"state_add", (PyCFunction)(void (*)(void))state_add_py, METH_FASTCALL,
	 "state_add(state, delta): add delta to a segment's state word in one step"},
	{"state_or", (PyCFunction)(void (*)(void))state_or_py, METH_FASTCALL,
	 "state_or(state, bits): set bits of a segment's state word in one step"},
	{"snapshot_release", snapshot_release_py, METH_O,
	 "snapshot_release(box): release the snapshot a ctypes.c_void_p holds and clear it, in one step"},
	{"thread_patched", thread_patched, METH_NOARGS,
	 "whether the calling thread has a patch open (of any segment)"},
	{"options", (PyCFunction)(void (*)(void))options_py, METH_FASTCALL,
	 "options(handle, cls): every option's record (list by index, dict by name), or a negative error"},
	{NULL}
};

static struct PyModuleDef fast_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "shmcfg._fast",
	.m_doc = "The attribute read of shmcfg config modules in C (optional).",
	.m_size = -1,
	.m_methods = fast_methods,
};

PyMODINIT_FUNC PyInit__fast(void);

PyMODINIT_FUNC PyInit__fast(void)
{
	if (PyType_Ready(&GetterType) < 0 || PyType_Ready(&PatchType) < 0)
		return NULL;
	if (!zero && !(zero = PyLong_FromLong(0)))
		return NULL;
	if (!empty_str && !(empty_str = PyUnicode_FromString("")))
		return NULL;
	for (int k = 0; k < 10; k++)
		if (!opt_attr[k] && !(opt_attr[k] = PyUnicode_InternFromString(opt_attr_names[k])))
			return NULL;
	PyObject *m = PyModule_Create(&fast_module);
	if (!m)
		return NULL;
	if (PyModule_AddObjectRef(m, "Getter", (PyObject *)&GetterType) < 0 ||
	    PyModule_AddObjectRef(m, "Patch", (PyObject *)&PatchType) < 0 ||
	    PyModule_AddIntConstant(m, "VIEW_ABI", SHMCFG_VIEW_ABI) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}

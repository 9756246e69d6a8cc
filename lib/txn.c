/*
 * Transactions: the changes a commit will publish. Every change is checked
 * as it is recorded (options.c prepares the value); a refused change poisons
 * the transaction, which then commits nothing. publish.c commits them.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A refused change poisons its transaction, which then commits nothing (all
 * or nothing, as the README promises): keep the first refusal for
 * shmcfg_txn_commit(). Returns r. */
static int txn_refuse(shmcfg_txn *t, int r)
{
	if (r && t && !t->err) {
		t->err = r;
		t->err_detail = shmcfg__strdup(shmcfg_errdetail());
	}
	return r;
}

/* assert_return for the calls that change a transaction: poisons it too */
#define txn_assert_return(t, expr)                                                          \
	do {                                                                                \
		if (__builtin_expect(!(expr), 0))                                           \
			return txn_refuse((t), shmcfg__err(-EINVAL, "%s: invalid argument (%s)", \
							   __func__, #expr));               \
	} while (0)

int shmcfg_txn_begin(shmcfg *h, shmcfg_txn **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	if (h->rdonly)
		return shmcfg__err(SHMCFG_E_READONLY, "%s: attached read-only, cannot write", h->name);
	shmcfg_txn *t = shmcfg__calloc(1, sizeof *t);
	if (!t)
		return shmcfg__nomem();
	t->h = h;
	t->layer = LAYER_USER;
	*ret = t;
	return 0;
}

void shmcfg_txn_abort(shmcfg_txn *t)
{
	SHMCFG_API_KEEP;
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		shmcfg_value_clear(&t->ch[i].v);
	shmcfg__free(t->ch);
	shmcfg__free(t->err_detail);
	shmcfg__free(t);
}

int shmcfg_txn_layer(shmcfg_txn *t, shmcfg_source layer)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	/* the environment's layers come from the environment only */
	if (layer != SHMCFG_SRC_USER && layer != SHMCFG_SRC_KNOB && layer != SHMCFG_SRC_CLUSTER)
		return txn_refuse(t, shmcfg__err(-EINVAL,
						 "transactions write the user, cluster or knob layer, not %s",
						 shmcfg_source_name(layer)));
	t->layer = layer_of(layer);
	return 0;
}

int shmcfg_txn_origin(shmcfg_txn *t, uint64_t cluster_rev, const char *who)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	t->cluster_rev = cluster_rev;
	snprintf(t->who, sizeof t->who, "%s", who ? who : "");
	return 0;
}

/* Record a change; any earlier change of the same option and layer goes. */
static int txn_put(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, bool reset, shmcfg_value *v)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->ch[i].opt == opt && t->ch[i].layer == layer) {
			shmcfg_value_clear(&t->ch[i].v);
			t->ch[i].reset = reset;
			t->ch[i].v = *v;
			return 0;
		}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct change *ch = shmcfg__realloc(t->ch, cap * sizeof *ch);
		if (!ch)
			return shmcfg__nomem();
		t->ch = ch;
		t->cap = cap;
	}
	t->ch[t->n++] = (struct change){opt, layer, reset, *v};
	return 0;
}

/* The option a change writes (an alias's final target), on a layer it has. */
static int target_of(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, shmcfg_opt *final)
{
	int r = shmcfg__target_of(t->h, opt, final);
	const struct opt_desc *d = r ? NULL : opt_d(t->h, *final);
	if (!r && layer == LAYER_KNOB && !(d->flags & DESC_F_HAS_KNOB))
		r = shmcfg__err(SHMCFG_E_LAYER, "%s: option declares no knob", sstr(t->h, d->name));
	return r;
}

int shmcfg__txn_set_layer(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, const shmcfg_value *v)
{
	shmcfg_opt f;
	shmcfg_value c;
	int r = target_of(t, opt, layer, &f);
	if (r || (r = shmcfg__prepare_value(t->h, f, v, &c)))
		return r;
	if ((r = txn_put(t, f, layer, false, &c)))
		shmcfg_value_clear(&c);
	return r;
}

int shmcfg_txn_set(shmcfg_txn *t, shmcfg_opt opt, const shmcfg_value *v)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t && v);
	return txn_refuse(t, shmcfg__txn_set_layer(t, opt, t->layer, v));
}

int shmcfg_txn_set_text(shmcfg_txn *t, shmcfg_opt opt, const char *text)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t && text);
	shmcfg_value v;
	int r = shmcfg__parse_for(t->h, opt, text, &v);
	if (r)
		return txn_refuse(t, r);
	r = shmcfg_txn_set(t, opt, &v); /* poisons t itself */
	shmcfg_value_clear(&v);
	return r;
}

int shmcfg_txn_set_bool(shmcfg_txn *t, shmcfg_opt opt, bool v)
{
	SHMCFG_API_ENTRY;
	return shmcfg_txn_set(t, opt, &(shmcfg_value){.type = SHMCFG_BOOL, .u.b = v});
}

int shmcfg_txn_set_int(shmcfg_txn *t, shmcfg_opt opt, int64_t v)
{
	SHMCFG_API_ENTRY;
	return shmcfg_txn_set(t, opt, &(shmcfg_value){.type = SHMCFG_INT, .u.i = v});
}

int shmcfg_txn_set_float(shmcfg_txn *t, shmcfg_opt opt, double v)
{
	SHMCFG_API_ENTRY;
	return shmcfg_txn_set(t, opt, &(shmcfg_value){.type = SHMCFG_FLOAT, .u.f = v});
}

int shmcfg_txn_set_str(shmcfg_txn *t, shmcfg_opt opt, const char *v)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, v);
	return shmcfg_txn_set(t, opt,
			      &(shmcfg_value){.type = SHMCFG_STR, .u.str = {v, strlen(v)}});
}

int shmcfg_txn_reset(shmcfg_txn *t, shmcfg_opt opt)
{
	SHMCFG_API_ENTRY;
	txn_assert_return(t, t);
	shmcfg_opt f;
	int r = target_of(t, opt, t->layer, &f);
	if (r)
		return txn_refuse(t, r);
	shmcfg_value none = {.type = opt_d(t->h, f)->type, .is_null = true};
	return txn_refuse(t, txn_put(t, f, t->layer, true, &none));
}

void shmcfg_set_commit_timeout(shmcfg *h, int timeout_ms)
{
	SHMCFG_API_KEEP;
	if (h)
		h->commit_timeout_ms = timeout_ms < 0 ? 0 : timeout_ms;
}

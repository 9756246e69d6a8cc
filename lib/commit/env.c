/* SPDX-License-Identifier: MIT */
/*
 * The environment, read once at creation into the env layers of generation
 * 1, so that every process shares it (doc/design.md: the first set variable of
 * each list wins; a bad value fails the creation naming the variable).
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void shmcfg__env_used_free(shmcfg *h)
{
	for (size_t i = 0; i < h->n_env_used; i++) {
		shmcfg__free((char *)h->env_used[i].var);
		shmcfg__free((char *)h->env_used[i].value);
	}
	shmcfg__free(h->env_used);
	h->env_used = NULL;
	h->n_env_used = 0;
}

/* Remember a variable that fills a layer, for shmcfg_env_applied(). */
static int env_used_add(shmcfg *h, const char *var, const char *text, shmcfg_opt opt, enum layer layer)
{
	shmcfg_env_use *u = shmcfg__realloc(h->env_used, (h->n_env_used + 1) * sizeof *u);
	if (!u)
		return shmcfg__nomem();
	h->env_used = u;
	u += h->n_env_used;
	*u = (shmcfg_env_use){shmcfg__strdup(var), shmcfg__strdup(text), opt,
			      layer == LAYER_ENV_FORCE ? SHMCFG_SRC_ENV_FORCE : SHMCFG_SRC_ENV_DEFAULT};
	if (!u->var || !u->value) {
		shmcfg__free((char *)u->var);
		shmcfg__free((char *)u->value);
		return shmcfg__nomem();
	}
	h->n_env_used++;
	return 0;
}

int shmcfg_env_applied(const shmcfg *h, size_t i, shmcfg_env_use *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	if (i >= h->n_env_used)
		return -ENOENT;
	*ret = h->env_used[i];
	return 0;
}

/*
 * Generation 1 of a new segment: the env layers from envp (doc/design.md: the
 * first set variable of each list wins). A bad value fails the creation with
 * an error naming the variable.
 */
int shmcfg__env_changes(shmcfg_txn *t, char *const *envp)
{
	shmcfg *h = t->h;
	int r = 0;
	for (uint32_t i = 0; envp && !r && i < h->lay.nopts; i++) {
		if ((r = shmcfg__opt_use(h, i)))
			break;
		const struct opt_desc *d = opt_d(h, i);
		struct {
			struct sref list;
			uint32_t n;
			enum layer layer;
		} lists[2] = {{d->env_default, d->n_env_default, LAYER_ENV_DEFAULT},
			      {d->env_force, d->n_env_force, LAYER_ENV_FORCE}};
		for (int k = 0; k < 2 && !r; k++) {
			const char *var = sstr(h, lists[k].list);
			for (uint32_t j = 0; j < lists[k].n; j++, var += strlen(var) + 1) {
				const char *text = NULL;
				size_t vl = strlen(var);
				for (char *const *e = envp; *e; e++)
					if (!strncmp(*e, var, vl) && (*e)[vl] == '=') {
						text = *e + vl + 1;
						break;
					}
				if (!text)
					continue;
				shmcfg_value v;
				r = shmcfg__parse_env(d->type, var, text, &v);
				if (!r) {
					r = shmcfg__txn_set_layer(t, i, lists[k].layer, &v);
					if (r) {
						char why[400];
						snprintf(why, sizeof why, "%s", shmcfg_errdetail());
						/* a bad value is the variable's fault; memory is not */
						r = shmcfg__err(r == -ENOMEM ? r : SHMCFG_E_ENV,
								"environment variable %s: %s", var, why);
					}
					shmcfg_value_clear(&v);
				}
				if (!r)
					r = env_used_add(h, var, text, i, lists[k].layer);
				break;
			}
		}
	}
	return r;
}

/* SPDX-License-Identifier: MIT */
/*
 * shmctl's history commands (the segment's own history: lib/commit/history.c):
 * log, rollback and diff (as code, or between generations).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmctl.h"

/* ---- one change, one entry -------------------------------------------- */

/* "1", "\"text\"", "null", or "unset" (no value in that layer). */
static char *side_text(bool set, const shmcfg_value *v)
{
	return set ? value_text(v) : strdup("unset");
}

static json_t *side_json(bool set, const shmcfg_value *v)
{
	return set ? value_json(v) : json_null();
}

/* A layer's move in JSON, as log and diff G1 G2 both give it: "layer",
 * "old_set", "old", "new_set", "new" (null where not set) added to o. */
static void add_layer_move(json_t *o, shmcfg_source layer, bool old_set, const shmcfg_value *old_value,
			   bool new_set, const shmcfg_value *new_value)
{
	json_object_set_new(o, "layer", json_string(shmcfg_source_name(layer)));
	json_object_set_new(o, "old_set", json_boolean(old_set));
	json_object_set_new(o, "old", side_json(old_set, old_value));
	json_object_set_new(o, "new_set", json_boolean(new_set));
	json_object_set_new(o, "new", side_json(new_set, new_value));
}

/* "  name: old -> new" ("name [knob]" for a layer other than user). */
static void print_change(shmcfg *h, const shmcfg_layer_change *c, const char *indent)
{
	char *o = side_text(c->old_set, &c->old_value), *n = side_text(c->new_set, &c->new_value);
	char layer[32] = "";
	if (c->layer != SHMCFG_SRC_USER)
		snprintf(layer, sizeof layer, " [%s]", shmcfg_source_name(c->layer));
	printf("%s%s%s: %s -> %s%s%s\n", indent, opt_name(h, c->opt), layer, o ? o : "?", color(C_BOLD),
	       n ? n : "?", color(C_RESET));
	free(o);
	free(n);
}

static const char *origin_of(const shmcfg_history_entry *e)
{
	return e->who[0] ? e->who : e->process;
}

/* The options a commit changed whose values the history did not keep, as
 * the commit log lists them (its last 64 commits): true and *ci if it
 * lists them all. */
static bool changed_listed(const shmcfg *h, const shmcfg_history_entry *e, shmcfg_commit *ci)
{
	return !e->values_kept && shmcfg_commit_info(h, e->generation, ci) == 0 && ci->nids == ci->nchanged;
}

static json_t *entry_json(shmcfg *h, const shmcfg_history_entry *e)
{
	char t[40];
	time_utc(e->time_ns, t, sizeof t);
	json_t *o = json_object(), *ch = e->values_kept ? json_array() : json_null();
	json_object_set_new(o, "generation", json_integer((json_int_t)e->generation));
	json_object_set_new(o, "time", json_string(t));
	json_object_set_new(o, "time_ns", json_integer((json_int_t)e->time_ns));
	json_object_set_new(o, "pid", json_integer(e->pid));
	json_object_set_new(o, "uid", json_integer(e->uid));
	json_object_set_new(o, "user", e->user[0] ? json_string(e->user) : json_null());
	json_object_set_new(o, "process", json_string(e->process));
	json_object_set_new(o, "origin", json_string(origin_of(e)));
	json_object_set_new(o, "who", json_string(e->who));
	json_object_set_new(o, "cluster_revision", json_integer((json_int_t)e->cluster_rev));
	json_object_set_new(o, "nchanges", json_integer(e->nchanges));
	json_object_set_new(o, "values_kept", json_boolean(e->values_kept));
	if (!e->values_kept) { /* the names at least, where the commit log still lists them */
		shmcfg_commit ci;
		bool listed = changed_listed(h, e, &ci);
		json_t *names = listed ? json_array() : json_null();
		for (uint32_t k = 0; listed && k < ci.nids; k++)
			json_array_append_new(names, json_string(opt_name(h, ci.ids[k])));
		json_object_set_new(o, "changed", names);
	}
	for (uint32_t k = 0; e->values_kept && k < e->nchanges; k++) {
		const shmcfg_layer_change *c = &e->changes[k];
		json_t *r = json_object();
		json_object_set_new(r, "name", json_string(opt_name(h, c->opt)));
		add_layer_move(r, c->layer, c->old_set, &c->old_value, c->new_set, &c->new_value);
		json_array_append_new(ch, r);
	}
	json_object_set_new(o, "changes", ch);
	return o;
}

static void print_entry(shmcfg *h, const shmcfg_history_entry *e)
{
	char t[40], who[320];
	time_local(e->time_ns, t, sizeof t);
	committer_text(e->user, e->uid, e->process, e->pid, e->who, e->cluster_rev, who, sizeof who);
	printf("%sgeneration %llu%s  %s  %s\n", color(C_YELLOW), (unsigned long long)e->generation, color(C_RESET), t,
	       who);
	shmcfg_commit ci;
	if (!e->values_kept && changed_listed(h, e, &ci)) {
		printf("    %u layer change%s (values not kept: too big for the history); options changed:",
		       e->nchanges, e->nchanges == 1 ? "" : "s");
		for (uint32_t k = 0; k < ci.nids; k++)
			printf("%s %s", k ? "," : "", opt_name(h, ci.ids[k]));
		putchar('\n');
	} else if (!e->values_kept)
		printf("    %u layer change%s (values not kept: too big for the history; which options: no "
		       "longer known)\n", e->nchanges, e->nchanges == 1 ? "" : "s");
	else if (!e->nchanges)
		printf("    no layer changed\n");
	for (uint32_t k = 0; e->values_kept && k < e->nchanges; k++)
		print_change(h, &e->changes[k], "    ");
}

/* Whether e touches one of the options (final targets) filter[0..n). A
 * commit whose values the history did not keep: as the commit log lists
 * its options, or, when it no longer does, shown (it may have). */
static bool touches(const shmcfg *h, const shmcfg_history_entry *e, const shmcfg_opt *filter, size_t n)
{
	shmcfg_commit ci;
	if (!e->values_kept && !changed_listed(h, e, &ci))
		return true;
	for (uint32_t k = 0; k < (e->values_kept ? e->nchanges : ci.nids); k++)
		for (size_t i = 0; i < n; i++)
			if ((e->values_kept ? e->changes[k].opt : ci.ids[k]) == filter[i])
				return true;
	return false;
}

/* ---- log -------------------------------------------------------------- */

int cmd_log(int argc, char **argv)
{
	bool json = false;
	uint64_t max = UINT64_MAX;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'J')
			json = true;
		if (c == 'n' && (!parse_u64(optarg, &max) || max == 0))
			return usage_error("-n takes a count from 1, not '%s'", optarg);
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	const char *seg = argv[optind++];
	shmcfg *h;
	if (open_segment(seg, true, &h))
		return EXIT_FAIL;
	size_t nf = (size_t)(argc - optind);
	shmcfg_opt *filter = calloc(nf ? nf : 1, sizeof *filter);
	int rc = filter ? EXIT_OK : fail("out of memory");
	for (size_t i = 0; rc == EXIT_OK && i < nf; i++) {
		shmcfg_opt opt;
		rc = resolve_final(h, argv[optind + i], &opt, &filter[i]);
	}
	json_t *arr = json ? json_array() : NULL;
	uint64_t oldest, shown = 0;
	uint64_t cur = rc == EXIT_OK ? shmcfg_history_range(h, &oldest, NULL) : 0;
	if (rc == EXIT_OK && !cur)
		rc = fail_lib(-ENOMEM, seg); /* the one way it fails on a handle */
	for (uint64_t g = cur; rc == EXIT_OK && g >= oldest && g > 0 && shown < max; g--) {
		shmcfg_history_entry *e;
		int r = shmcfg_history_get(h, g, &e);
		if (r == -ENOENT)
			break; /* overwritten meanwhile: older ones are gone too */
		if (r) {
			rc = fail_lib(r, seg);
			break;
		}
		if (!nf || touches(h, e, filter, nf)) {
			shown++;
			if (json)
				json_array_append_new(arr, entry_json(h, e));
			else
				print_entry(h, e);
		}
		shmcfg_history_free(e);
	}
	if (json) {
		if (rc == EXIT_OK)
			rc = json_print(arr, false);
		else
			json_decref(arr);
	}
	free(filter);
	shmcfg_close(h);
	return rc;
}

/* ---- rollback --------------------------------------------------------- */

int cmd_rollback(int argc, char **argv)
{
	bool knob = false, quiet = false;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'K')
			knob = true;
		if (c == 'q')
			quiet = true;
	}
	if (argc - optind < 2)
		return usage_error("missing %s", optind >= argc ? "segment NAME" : "GENERATION");
	if (argc - optind > 2)
		return usage_error("unexpected argument '%s'", argv[optind + 2]);
	const char *seg = argv[optind];
	uint64_t gen, now;
	if (parse_generation(argv[optind + 1], &gen, &ec))
		return ec;
	shmcfg *h;
	if (open_segment(seg, false, &h))
		return EXIT_FAIL;
	char who[SHMCFG_WHO_MAX];
	snprintf(who, sizeof who, "shmctl rollback to generation %llu", (unsigned long long)gen);
	bool published = false;
	int r = shmcfg_rollback(h, gen, knob ? SHMCFG_ROLLBACK_KNOB : 0, who, &now, &published);
	int rc = r < 0 ? fail_lib(r, seg) : EXIT_OK;
	if (r == 0 && !published && !quiet)
		printf("nothing changed: the %s layer%s already as at generation %llu (generation %llu)\n",
		       knob ? "user and knob" : "user", knob ? "s are" : " is", (unsigned long long)gen,
		       (unsigned long long)now);
	shmcfg_history_entry *e;
	if (r == 0 && published && !quiet && (r = shmcfg_history_get(h, now, &e)) == 0) {
		for (uint32_t k = 0; e->values_kept && k < e->nchanges; k++)
			print_change(h, &e->changes[k], "");
		printf("rolled back to generation %llu (generation %llu)\n", (unsigned long long)gen,
		       (unsigned long long)now);
		shmcfg_history_free(e);
	}
	shmcfg_close(h);
	return rc;
}

/* ---- diff G1 [G2] ----------------------------------------------------- */

/* Every option whose value or layers differ between generations g1 and g2
 * (0: the current one): name, value at each, and each layer that moved. */
static int diff_generations(const char *seg, const char *g1_text, const char *g2_text, bool json)
{
	uint64_t g1, g2 = 0;
	int ec = 0;
	if (parse_generation(g1_text, &g1, &ec) || (g2_text && parse_generation(g2_text, &g2, &ec)))
		return ec;
	shmcfg *h;
	if (open_segment(seg, true, &h))
		return EXIT_FAIL;
	shmcfg_snapshot *a = NULL, *b = NULL;
	int r = snapshot_of(h, g1, &a), rc = EXIT_OK;
	if (r || (r = snapshot_of(h, g2, &b))) {
		rc = fail_lib(r, seg);
		goto out;
	}
	g2 = shmcfg_snapshot_generation(b);
	json_t *arr = json ? json_array() : NULL;
	size_t ndiff = 0;
	static const shmcfg_source layers[] = {SHMCFG_SRC_KNOB, SHMCFG_SRC_ENV_DEFAULT, SHMCFG_SRC_CLUSTER,
					       SHMCFG_SRC_USER, SHMCFG_SRC_ENV_FORCE};
	for (uint32_t i = 0; i < shmcfg_count(h) && rc == EXIT_OK; i++) {
		shmcfg_optinfo oi;
		shmcfg_value va, vb;
		if (shmcfg_opt_info(h, i, &oi) || oi.alias != SHMCFG_NO_OPT)
			continue; /* an alias moves with its target */
		if ((r = shmcfg_snapshot_get(a, i, &va)) || (r = shmcfg_snapshot_get(b, i, &vb))) {
			rc = fail_lib(r, oi.name);
			break;
		}
		bool moved = !shmcfg_value_equal(&va, &vb) || va.source != vb.source;
		json_t *jl = json ? json_array() : NULL;
		char *ta = value_text(&va), *tb = value_text(&vb);
		char lines[8][512];
		int nl = 0;
		for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
			shmcfg_value la, lb;
			int ra = shmcfg_snapshot_layer(a, i, layers[l], &la), rb = shmcfg_snapshot_layer(b, i, layers[l], &lb);
			if (ra < 0 || rb < 0 || (ra == rb && (ra == 1 || shmcfg_value_equal(&la, &lb))))
				continue;
			moved = true;
			char *xa = side_text(ra == 0, &la), *xb = side_text(rb == 0, &lb);
			if (json) {
				json_t *o = json_object();
				add_layer_move(o, layers[l], ra == 0, &la, rb == 0, &lb);
				json_array_append_new(jl, o);
			} else if (nl < 8) {
				snprintf(lines[nl++], sizeof lines[0], "    %s layer: %s -> %s", shmcfg_source_name(layers[l]),
					 xa ? xa : "?", xb ? xb : "?");
			}
			free(xa);
			free(xb);
		}
		if (moved) {
			ndiff++;
			if (json) {
				json_t *o = json_object();
				json_object_set_new(o, "name", json_string(oi.name));
				json_object_set_new(o, "old", value_json(&va));
				json_object_set_new(o, "old_source", json_string(shmcfg_source_name(va.source)));
				json_object_set_new(o, "new", value_json(&vb));
				json_object_set_new(o, "new_source", json_string(shmcfg_source_name(vb.source)));
				json_object_set_new(o, "layers", jl);
				json_array_append_new(arr, o);
				jl = NULL;
			} else {
				printf("%s: %s (%s) -> %s%s%s (%s)\n", oi.name, ta ? ta : "?", shmcfg_source_name(va.source),
				       color(C_BOLD), tb ? tb : "?", color(C_RESET), shmcfg_source_name(vb.source));
				for (int k = 0; k < nl; k++)
					puts(lines[k]);
			}
		}
		json_decref(jl);
		free(ta);
		free(tb);
	}
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "from", json_integer((json_int_t)g1));
		json_object_set_new(o, "to", json_integer((json_int_t)g2));
		json_object_set_new(o, "changes", arr);
		if (rc == EXIT_OK)
			rc = json_print(o, false);
		else
			json_decref(o);
	} else if (rc == EXIT_OK && !ndiff) {
		printf("no differences between generations %llu and %llu\n", (unsigned long long)g1,
		       (unsigned long long)g2);
	}
out:
	shmcfg_snapshot_release(a);
	shmcfg_snapshot_release(b);
	shmcfg_close(h);
	return rc;
}

/* diff NAME: the non-default settings as code; diff NAME G1 [G2]: above */
int cmd_diff(int argc, char **argv)
{
	shmcfg_codegen_format fmt = SHMCFG_CODEGEN_PYTHON;
	int c, ec = 0;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		if (c == -2)
			return ec;
		if (c == 'J')
			fmt = SHMCFG_CODEGEN_JSON;
		if (c == 'f') {
			if (!strcmp(optarg, "python"))
				fmt = SHMCFG_CODEGEN_PYTHON;
			else if (!strcmp(optarg, "shell"))
				fmt = SHMCFG_CODEGEN_SHELL;
			else if (!strcmp(optarg, "json"))
				fmt = SHMCFG_CODEGEN_JSON;
			else
				return usage_error("--format takes python, shell or json, not '%s'", optarg);
		}
	}
	if (optind >= argc)
		return usage_error("missing segment NAME");
	if (argc - optind > 3)
		return usage_error("unexpected argument '%s'", argv[optind + 3]);
	if (argc - optind > 1) /* diff NAME G1 [G2] */
		return diff_generations(argv[optind], argv[optind + 1], argc - optind > 2 ? argv[optind + 2] : NULL,
					fmt == SHMCFG_CODEGEN_JSON);
	shmcfg *h;
	if (open_segment(argv[optind], true, &h))
		return EXIT_FAIL;
	char *text = NULL;
	int r = shmcfg_codegen(h, fmt, &text);
	shmcfg_close(h);
	if (r)
		return fail_lib(r, argv[optind]);
	/* Python's repr() escapes what a terminal would act on (the library's
	 * codegen does as it does); the shell form's values are JSON, as is the
	 * json form (names are ASCII): their strings' C1 controls as \u escapes,
	 * which set and JSON read back as the same text */
	if (fmt != SHMCFG_CODEGEN_PYTHON && !(text = json_for_terminal(text)))
		return fail("out of memory");
	size_t l = strlen(text);
	fputs(text, stdout);
	if (l && text[l - 1] != '\n')
		putchar('\n');
	free(text);
	return EXIT_OK;
}

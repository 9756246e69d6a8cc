/* SPDX-License-Identifier: MIT */
/*
 * shmctl header: a C header of accessors for a schema (issue 12).
 *
 * The header holds the schema hash, compile-time option handles, an attach
 * helper that passes the hash to shmcfg_attach_with() (so a handle it
 * returns has exactly this schema: every handle, type and nullability below
 * is proven once, at attach), its options as an X-macro (P_OPTIONS) in
 * SHMCFG_DEFINE_OPTIONS's columns, one inline accessor per bool, int and
 * float option expanded from it by shmcfg.h's macros (shmcfg/options.h, the
 * ones SHMCFG_DEFINE_OPTIONS expands: one definition of an accessor) on the
 * proven reads, and a batched read of all of them under one stamp check.
 * doc/design.md ("Generated accessors") gives the argument.
 *
 * The schema comes from a segment, a schema file or the embedded default.
 * The library has no introspection of a schema that is not in a segment, and
 * the schema hash is by definition the digest of a segment's schema region:
 * for a file or the default, the command creates a private segment (unique
 * name, no environment, the smallest sizes), unlinks it at once and reads
 * the schema through that handle, exactly as an attacher will see it.
 *
 * The output depends only on the schema and the arguments (no time, version
 * or path): tests/cli/header.sh compares tests/bench/bench_schema.h with it.
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shmctl.h"

/* One option of the header. */
struct gopt {
	shmcfg_opt id;
	shmcfg_optinfo info; /* strings borrowed from the handle */
	shmcfg_value def;    /* the default of the alias chain's end (borrowed) */
	const char *alias;   /* the alias's target, or NULL */
	bool nullable, scalar;
	char *cname;         /* the name as a C identifier part */
	char *field;         /* its field in the values struct */
};

struct gen {
	shmcfg *h;
	const char *prefix;
	char *upper; /* the prefix in capitals, for macros */
	const char *strip;
	struct gopt *o;
	size_t n, nscalar;
	const char *source; /* "the schema file F", "segment S", ... */
	char **argv;        /* the arguments that shape the output, for its banner */
	int argc;
	FILE *f;
};

/* ------------------------------------------------------------------ */
/* The schema: a segment, or a private one made from a schema          */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* Names                                                              */
/* ------------------------------------------------------------------ */

/* Words a struct field may not be: C11 and C++ keywords, and the macros a C
 * program commonly has (stdbool's, GNU's predefined `linux` and `unix`). */
static const char *const reserved[] = {
	"_Alignas", "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary", "_Noreturn",
	"_Static_assert", "_Thread_local", "alignas", "alignof", "and", "and_eq", "asm", "auto",
	"bitand", "bitor", "bool", "break", "case", "catch", "char", "char16_t", "char32_t", "char8_t",
	"class", "co_await", "co_return", "co_yield", "compl", "concept", "const", "const_cast",
	"consteval", "constexpr", "constinit", "continue", "decltype", "default", "delete", "do",
	"double", "dynamic_cast", "else", "enum", "errno", "explicit", "export", "extern", "false",
	"float", "for", "friend", "goto", "i386", "if", "inline", "int", "linux", "long", "mutable",
	"namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq",
	"private", "protected", "public", "register", "reinterpret_cast", "requires", "restrict",
	"return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
	"switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
	"typename", "typeof", "union", "unix", "unsigned", "using", "virtual", "void", "volatile",
	"wchar_t", "while", "xor", "xor_eq", "NULL",
};

static bool is_reserved(const char *w)
{
	for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
		if (!strcmp(reserved[i], w))
			return true;
	return false;
}

static bool is_ident(const char *s)
{
	if (!*s || !(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') || *s == '_'))
		return false;
	for (; *s; s++)
		if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') || ('0' <= *s && *s <= '9') ||
		      *s == '_'))
			return false;
	return true;
}

/* The option's name as part of a C identifier: --strip's prefix (and its
 * dot) left out, dots as underscores. NULL if the name is not dotted
 * identifiers (the library checks names; a segment's are checked again). */
static char *c_name(const char *name, const char *strip)
{
	size_t k = strip ? strlen(strip) : 0;
	if (k && !strncmp(name, strip, k) && name[k] == '.')
		name += k + 1;
	char *c = strdup(name);
	if (!c)
		return NULL;
	for (char *p = c; *p; p++)
		if (*p == '.') {
			if (p == c || p[1] == '.' || !p[1])
				goto bad;
			*p = '_';
		}
	if (is_ident(c))
		return c;
bad:
	free(c);
	return NULL;
}

/* Every identifier the header defines, with the option that made it: two
 * options whose C names meet are refused, naming both. */
struct ident {
	char *id;
	const char *what;
};

static int cmp_ident(const void *a, const void *b)
{
	return strcmp(((const struct ident *)a)->id, ((const struct ident *)b)->id);
}

static int check_idents(struct gen *g)
{
	size_t cap = 16 + 3 * g->n, n = 0;
	struct ident *ids = calloc(cap, sizeof *ids);
	if (!ids)
		return fail("out of memory");
	static const char *const fixed[] = {"schema_hash", "nopts", "values", "defaults", "read",
					    "_read_slow", "attach", "attach_with", "check"};
	static const char *const fixed_upper[] = {"SCHEMA_HASH", "ACCESSORS", "OPTIONS", "HEADER_H"};
	int r = EXIT_OK;
#define ADD(what_, fmt, ...)                                                          \
	do {                                                                          \
		if (asprintf(&ids[n].id, fmt, __VA_ARGS__) < 0) {                     \
			r = fail("out of memory");                                    \
			goto out;                                                     \
		}                                                                     \
		ids[n++].what = (what_);                                              \
	} while (0)
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		ADD("the header", "%s_%s", g->prefix, fixed[i]);
	for (size_t i = 0; i < sizeof fixed_upper / sizeof fixed_upper[0]; i++)
		ADD("the header", "%s_%s", g->upper, fixed_upper[i]);
	for (size_t i = 0; i < g->n; i++) {
		ADD(g->o[i].info.name, "%s_%s_opt", g->prefix, g->o[i].cname);
		if (g->o[i].scalar)
			ADD(g->o[i].info.name, "%s_%s", g->prefix, g->o[i].cname);
	}
	qsort(ids, n, sizeof *ids, cmp_ident);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(ids[i - 1].id, ids[i].id)) {
			r = fail("%s and %s would both define %s: leave one out with --only, or choose "
				 "another --prefix or --strip",
				 ids[i - 1].what, ids[i].what, ids[i].id);
			goto out;
		}
	/* the fields of the values struct */
	for (size_t i = 0; i < n; i++)
		free(ids[i].id);
	n = 0;
	ADD("the header", "%s", "generation");
	for (size_t i = 0; i < g->n; i++)
		if (g->o[i].scalar) {
			ADD(g->o[i].info.name, "%s", g->o[i].field);
			if (g->o[i].nullable)
				ADD(g->o[i].info.name, "%s_null", g->o[i].field);
		}
	qsort(ids, n, sizeof *ids, cmp_ident);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(ids[i - 1].id, ids[i].id)) {
			r = fail("%s and %s would both be field %s of struct %s_values: leave one out "
				 "with --only, or choose another --strip",
				 ids[i - 1].what, ids[i].what, ids[i].id, g->prefix);
			goto out;
		}
#undef ADD
out:
	for (size_t i = 0; i < n; i++)
		free(ids[i].id);
	free(ids);
	return r;
}

/* ------------------------------------------------------------------ */
/* Emitting                                                           */
/* ------------------------------------------------------------------ */

static const char *ctype(shmcfg_type t)
{
	return t == SHMCFG_BOOL ? "bool" : t == SHMCFG_INT ? "int64_t" : "double";
}

static const char *tname(shmcfg_type t)
{
	switch (t) {
	case SHMCFG_BOOL:
		return "BOOL";
	case SHMCFG_INT:
		return "INT";
	case SHMCFG_FLOAT:
		return "FLOAT";
	case SHMCFG_STR:
		return "STR";
	case SHMCFG_LIST:
		return "LIST";
	default:
		return "SET";
	}
}

/* A double as a C literal that reads back exactly (the shortest such). */
static void c_double(char *buf, size_t len, double d)
{
	if (isnan(d)) {
		snprintf(buf, len, "__builtin_nan(\"\")");
		return;
	}
	if (isinf(d)) {
		snprintf(buf, len, d < 0 ? "(-__builtin_inf())" : "__builtin_inf()");
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, len, "%.*g", p, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".e"))
		strncat(buf, ".0", len - strlen(buf) - 1);
}

/* The option's default as a C expression of its type (0 for null). */
static void c_default(char *buf, size_t len, const struct gopt *o)
{
	const shmcfg_value *v = &o->def;
	if (v->is_null || v->type != o->info.type)
		snprintf(buf, len, "%s", o->info.type == SHMCFG_BOOL ? "false" : o->info.type == SHMCFG_INT ? "INT64_C(0)" : "0.0");
	else if (v->type == SHMCFG_BOOL)
		snprintf(buf, len, "%s", v->u.b ? "true" : "false");
	else if (v->type == SHMCFG_INT && v->u.i == INT64_MIN)
		snprintf(buf, len, "(-INT64_C(9223372036854775807) - 1)");
	else if (v->type == SHMCFG_INT)
		snprintf(buf, len, "INT64_C(%" PRId64 ")", v->u.i);
	else
		c_double(buf, len, v->u.f);
}

/* Text from the schema (a doc's first line, a default) inside a C comment:
 * its first line, at most @p max bytes (whole characters), no comment end,
 * and a blank for each character a terminal that shows the header would act
 * on (termsafe.h: a control, C1, a line separator, a byte that is no UTF-8). */
static void comment_text(FILE *f, const char *s, size_t max)
{
	size_t n = strcspn(s, "\n"), i = 0;
	for (size_t len; i < n; i += len) {
		bool unsafe;
		len = term_char(s + i, n - i, "", &unsafe);
		if (i + len > max)
			break;
		if (unsafe)
			fputc(' ', f);
		else if (s[i] == '*' && s[i + 1] == '/')
			fputs("* ", f);
		else
			fwrite(s + i, 1, len, f);
	}
	if (i < n)
		fputs("...", f);
}

/* A doc's first paragraph in a comment: lines joined, at most 240 bytes,
 * wrapped at 76 columns, each line starting " * ". */
static void comment_doc(FILE *f, const char *doc)
{
	char buf[256];
	size_t n = 0;
	bool space = false, cut = false;
	for (const char *p = doc; *p; p++) {
		if (p[0] == '\n' && p[1] == '\n')
			break;
		if (*p == ' ' || *p == '\n' || *p == '\t') {
			space = n > 0;
			continue;
		}
		if (n + 2 >= 240) {
			cut = true;
			if (((unsigned char)*p & 0xc0) == 0x80) { /* no character cut in two */
				while (n && ((unsigned char)buf[n - 1] & 0xc0) == 0x80)
					n--;
				n -= n > 0;
			}
			break;
		}
		if (space)
			buf[n++] = ' ';
		space = false;
		buf[n++] = *p;
	}
	buf[n] = 0;
	if (cut)
		strcat(buf, "...");
	for (char *line = buf; *line;) {
		size_t len = strlen(line);
		if (len > 73) {
			len = 73;
			while (len > 20 && line[len] != ' ')
				len--;
			if (line[len] != ' ')
				for (len = 73; len > 1 && ((unsigned char)line[len] & 0xc0) == 0x80;)
					len--; /* no character cut in two */
		}
		char save = line[len];
		line[len] = 0;
		fputs("\n * ", f);
		comment_text(f, line, 80);
		line[len] = save;
		line += len;
		while (*line == ' ')
			line++;
	}
}

/* "int, nullable, default 8" / "str, alias of x.y" */
static void describe(FILE *f, const struct gopt *o)
{
	fprintf(f, "%s", shmcfg_type_name(o->info.type));
	if (o->nullable)
		fputs(", nullable", f);
	if (o->alias) {
		fputs(", alias of ", f);
		comment_text(f, o->alias, 200);
	}
	char *text = NULL;
	if (!o->alias && shmcfg_value_format(&o->def, &text) == 0 && text) {
		fputs(", default ", f);
		comment_text(f, text, 60);
	}
	free(text);
}

static void emit_banner(struct gen *g)
{
	FILE *f = g->f;
	char hex[33];
	uint8_t hash[16];
	shmcfg_schema_hash(g->h, hash);
	hex16(hash, hex);
	fprintf(f, "/*\n * Accessors of a shmcfg schema (%zu of its %u options), generated by\n", g->n,
		shmcfg_count(g->h));
	fprintf(f, " * `shmctl header` from %s; do not edit.\n * Arguments:", g->source);
	for (int i = 0; i < g->argc; i++) {
		fputc(' ', f);
		comment_text(f, g->argv[i], 200);
	}
	fprintf(f,
		"\n"
		" *\n"
		" * Schema hash %s.\n"
		" * %s_attach() and %s_attach_with() attach only a segment of exactly\n"
		" * this schema (shmcfg_attach_with() with the hash as expect_schema_hash:\n"
		" * SHMCFG_E_SCHEMA otherwise, the detail naming both hashes). That proves\n"
		" * every handle below, its type and its nullability, and the accessors do\n"
		" * not check them again: use them only on a handle that %s_attach() or\n"
		" * %s_attach_with() returned (shmcfg_reattach() keeps the hash), or that\n"
		" * %s_check() accepted.\n"
		" *\n"
		" * Reads, inline: no call, syscall, lock or store on their hot path.\n"
		" *  - T %s_NAME(h) per bool, int and float option that is not nullable:\n"
		" *    its value, or its schema default if the read fails (a corrupt\n"
		" *    segment).\n"
		" *  - int %s_NAME(h, T *ret) per nullable one: 0 (*ret set), SHMCFG_NULL\n"
		" *    or an error, as shmcfg_get_int().\n"
		" *  - %s_read(h, &values) fills struct %s_values with all of them from\n"
		" *    one generation (values.generation): one stamp check for every cell.\n"
		" * A thread with patches (shmcfg_patch_push()) reads them: its reads take\n"
		" * the slow path. Strings are not read here: str, list and set options\n"
		" * have a handle and no accessor; read them from a snapshot\n"
		" * (shmcfg_snapshot_get(), zero-copy) or with shmcfg_get() (a copy).\n"
		" */\n",
		hex, g->prefix, g->prefix, g->prefix, g->prefix, g->prefix, g->prefix, g->prefix,
		g->prefix, g->prefix);
	fprintf(f,
		"#ifndef %s_HEADER_H\n"
		"#define %s_HEADER_H\n\n"
		"#include <stdbool.h>\n"
		"#include <stdint.h>\n\n"
		"#include \"shmcfg.h\"\n\n"
		"#if !defined(SHMCFG_GEN_ABI) || SHMCFG_GEN_ABI != 2 || SHMCFG_VIEW_ABI != 3\n"
		"#error \"generated for shmcfg.h's SHMCFG_GEN_ABI 2 and SHMCFG_VIEW_ABI 3: regenerate with this shmcfg's shmctl header\"\n"
		"#endif\n\n"
		"#ifdef __cplusplus\n"
		"extern \"C\" {\n"
		"#endif\n\n",
		g->upper, g->upper);
	fprintf(f, "#define %s_SCHEMA_HASH \"%s\"\n", g->upper, hex);
	fprintf(f, "static const uint8_t %s_schema_hash[16] __attribute__((unused)) = {\n\t", g->prefix);
	for (int i = 0; i < 16; i++)
		fprintf(f, "0x%02x%s", hash[i], i == 15 ? "};\n" : i == 7 ? ",\n\t" : ", ");
	fprintf(f, "enum { %s_nopts = %u }; /* options in the schema */\n\n", g->prefix, shmcfg_count(g->h));
}

static void emit_handles(struct gen *g)
{
	FILE *f = g->f;
	fprintf(f, "/* Option handles: indices in declaration order, proven by the hash. */\nenum {\n");
	for (size_t i = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		fprintf(f, "\t%s_%s_opt = %u, /* %s: ", g->prefix, o->cname, o->id, o->info.name);
		describe(f, o);
		fprintf(f, "%s */\n", o->scalar ? "" : "; no accessor");
	}
	fprintf(f, "};\n\n");
}

/* An accessor's comment (the option, its doc) and its prototype: the
 * definition is shmcfg.h's, from the P_OPTIONS list (emit_options). */
static void emit_accessor(struct gen *g, const struct gopt *o)
{
	FILE *f = g->f;
	const char *p = g->prefix, *T = ctype(o->info.type);
	fprintf(f, "/* %s: ", o->info.name);
	describe(f, o);
	if (o->info.doc && *o->info.doc) {
		fputc('.', f);
		comment_doc(f, o->info.doc);
	}
	if (o->info.deprecated) {
		fputs("\n * Deprecated (inline reads do not warn): ", f);
		comment_text(f, o->info.deprecated, 80);
	}
	fputs(" */\n", f);
	if (!o->nullable)
		fprintf(f, "static inline %s %s_%s(const shmcfg *h);\n\n", T, p, o->cname);
	else
		fprintf(f, "static inline int %s_%s(const shmcfg *h, %s *ret);\n\n", p, o->cname, T);
}

/* The options as an X-macro in SHMCFG_DEFINE_OPTIONS's columns, with what
 * the hash gives in place of its designators, and the accessors expanded
 * from it by the macros that SHMCFG_DEFINE_OPTIONS uses too
 * (shmcfg/options.h): one definition of a handle's accessor. */
static void emit_options(struct gen *g)
{
	FILE *f = g->f;
	fprintf(f,
		"/* X(id, \"name\", TYPE, nullable, default) per option: the columns of\n"
		" * SHMCFG_DEFINE_OPTIONS (shmcfg.h) with what the schema hash proves in\n"
		" * place of its schema designators; TYPE as in SHMCFG_##TYPE, nullable 0\n"
		" * or 1, default the schema default as a C expression (0 for str, list\n"
		" * and set: no accessor). */\n"
		"#define %s_OPTIONS(X)",
		g->upper);
	for (size_t i = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		char def[64] = "0";
		if (o->scalar)
			c_default(def, sizeof def, o);
		fprintf(f, " \\\n\tX(%s_%s, \"%s\", %s, %d, %s)", g->prefix, o->cname, o->info.name,
			tname(o->info.type), o->nullable, def);
	}
	fprintf(f, "\n\n");
}

static void emit_accessors(struct gen *g)
{
	FILE *f = g->f;
	for (size_t i = 0; i < g->n; i++)
		if (g->o[i].scalar)
			emit_accessor(g, &g->o[i]);
	fprintf(f, "/* The accessors declared above: the proven reads of shmcfg.h's\n"
		   " * SHMCFG__ACC_PROVEN_0 (the value, or the default) and _1 (nullable). */\n"
		   "%s_OPTIONS(SHMCFG__X_PROVEN_ACC)\n\n",
		g->upper);
}

/* The value of bits @p b (an expression) as the option's C type. */
static void emit_value(FILE *f, const struct gopt *o, const char *b)
{
	if (o->info.type == SHMCFG_FLOAT)
		fprintf(f, "shmcfg__f64(%s)", b);
	else if (o->info.type == SHMCFG_BOOL)
		fprintf(f, "%s != 0", b);
	else
		fprintf(f, "(int64_t)%s", b);
}

static void emit_batch(struct gen *g)
{
	FILE *f = g->f;
	const char *p = g->prefix;
	if (!g->nscalar) {
		fprintf(f, "/* No bool, int or float option: no batched read. */\n\n");
		return;
	}
	fprintf(f, "/* The options above, read together by %s_read(). A nullable option's\n"
		   " * field means nothing while its _null field is true. */\n"
		   "struct %s_values {\n"
		   "\tuint64_t generation; /* the generation of every field (0: the read failed) */\n",
		p, p);
	for (size_t i = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		if (!o->scalar)
			continue;
		fprintf(f, "\t%s %s; /* %s */\n", ctype(o->info.type), o->field, o->info.name);
		if (o->nullable)
			fprintf(f, "\tbool %s_null;\n", o->field);
	}
	fprintf(f, "};\n\n/* The schema defaults: what %s_read() gives when the read fails. */\n"
		   "static const struct %s_values %s_defaults __attribute__((unused)) = {\n\t0,\n",
		p, p, p);
	for (size_t i = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		if (!o->scalar)
			continue;
		char def[64];
		c_default(def, sizeof def, o);
		fprintf(f, "\t%s, /* %s */\n", def, o->field);
		if (o->nullable)
			fprintf(f, "\t%s, /* %s_null */\n", o->def.is_null ? "true" : "false", o->field);
	}
	fprintf(f, "};\n\n");

	/* the slow path: a patched thread, or SHMCFG__SPIN failed validations */
	fprintf(f,
		"/* The slow path of %s_read(): a patched thread (its overlay, one\n"
		" * generation with its patches), or a read that did not validate\n"
		" * SHMCFG__SPIN times (shmcfg__get_slow_n: the library's retry rule). */\n"
		"static __attribute__((noinline, cold, unused)) int %s__read_slow(const shmcfg *h, struct %s_values *ret)\n"
		"{\n"
		"\tstatic const shmcfg_opt opts[%zu] = {\n",
		p, p, p, g->nscalar);
	for (size_t i = 0; i < g->n; i++)
		if (g->o[i].scalar)
			fprintf(f, "\t\t%s_%s_opt,\n", p, g->o[i].cname);
	fprintf(f, "\t};\n\tstatic const shmcfg_type types[%zu] = {\n\t\t", g->nscalar);
	for (size_t i = 0, k = 0; i < g->n; i++)
		if (g->o[i].scalar)
			fprintf(f, "SHMCFG_%s,%s", tname(g->o[i].info.type),
				++k == g->nscalar ? "\n" : k % 4 == 0 ? "\n\t\t" : " ");
	fprintf(f,
		"\t};\n"
		"\tuint64_t b[%zu], gen;\n"
		"\tbool null[%zu];\n"
		"\tint r = shmcfg__get_slow_n(h, %zu, opts, types, b, null, &gen);\n"
		"\tif (r) {\n"
		"\t\t*ret = %s_defaults;\n"
		"\t\treturn r;\n"
		"\t}\n"
		"\tret->generation = gen;\n",
		g->nscalar, g->nscalar, g->nscalar, p);
	for (size_t i = 0, k = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		if (!o->scalar)
			continue;
		char b[32];
		snprintf(b, sizeof b, "b[%zu]", k);
		/* null in an option that is not nullable: a corrupt segment */
		if (o->nullable)
			fprintf(f, "\tret->%s_null = null[%zu];\n\tret->%s = null[%zu] ? %s_defaults.%s : ", o->field,
				k, o->field, k, p, o->field);
		else
			fprintf(f, "\tret->%s = null[%zu] ? %s_defaults.%s : ", o->field, k, p, o->field);
		emit_value(f, o, b);
		fputs(";\n", f);
		k++;
	}
	fprintf(f, "\treturn 0;\n}\n\n");

	/* the hot path */
	fprintf(f,
		"/*\n"
		" * Read every option of struct %s_values from one generation: one\n"
		" * acquire load of `current` (A), one relaxed load per cell (and of its\n"
		" * null bit, for a nullable option), one acquire fence (B) and one stamp\n"
		" * compare for all of them. (A) pairs with the commit's store of `current`\n"
		" * (E), (B) with its release fence (C) after the busy mark, so a stamp\n"
		" * equal to the generation in `current` proves that no cell was\n"
		" * rewritten during the read (shmcfg.h, shmcfg__seq_begin). A read that\n"
		" * did not validate is retried; after SHMCFG__SPIN, and for a patched\n"
		" * thread, the slow path answers, from one generation too.\n"
		" * Returns 0, or an error of the slow path (*ret then holds\n"
		" * %s_defaults).\n"
		" */\n"
		"static inline int %s_read(const shmcfg *h, struct %s_values *ret)\n"
		"{\n"
		"\tconst struct shmcfg_view *v = (const struct shmcfg_view *)h;\n"
		"\tif (__builtin_expect(shmcfg__tls_patched == 0, 1)) {\n"
		"\t\tfor (int spin = 0; spin < SHMCFG__SPIN; spin++) {\n"
		"\t\t\tuint64_t cur;\n"
		"\t\t\tconst char *slot = shmcfg__seq_begin(v, &cur); /* (A) */\n",
		p, p, p, p);
	for (size_t i = 0, k = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		if (!o->scalar)
			continue;
		fprintf(f, "\t\t\tuint64_t b%zu = shmcfg__seq_val(slot, %s_%s_opt);\n", k, p, o->cname);
		if (o->nullable)
			fprintf(f, "\t\t\tuint64_t m%zu = shmcfg__seq_meta(slot, %s_%s_opt);\n", k, p, o->cname);
		k++;
	}
	fprintf(f, "\t\t\tif (__builtin_expect(shmcfg__seq_end(slot, cur), 1)) { /* (B), the stamp */\n"
		   "\t\t\t\tret->generation = cur >> SHMCFG__SLOT_BITS;\n");
	for (size_t i = 0, k = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		if (!o->scalar)
			continue;
		char b[32];
		snprintf(b, sizeof b, "b%zu", k);
		fprintf(f, "\t\t\t\tret->%s = ", o->field);
		emit_value(f, o, b);
		fputs(";\n", f);
		if (o->nullable)
			fprintf(f, "\t\t\t\tret->%s_null = (m%zu >> 8) & 1;\n", o->field, k);
		k++;
	}
	fprintf(f, "\t\t\t\treturn 0;\n\t\t\t}\n\t\t}\n\t}\n\treturn %s__read_slow(h, ret);\n}\n\n", p);
}

static void emit_attach(struct gen *g)
{
	FILE *f = g->f;
	const char *p = g->prefix;
	fprintf(f,
		"/* Attach segment @p name only if its schema is this header's:\n"
		" * shmcfg_attach() with the schema hash. SHMCFG_E_SCHEMA (the detail\n"
		" * names both hashes) for a segment of another schema. */\n"
		"static inline int %s_attach(const char *name, unsigned flags, shmcfg **ret)\n"
		"{\n"
		"\treturn shmcfg_attach(name, flags, %s_schema_hash, ret);\n"
		"}\n\n"
		"/* As %s_attach(), with shmcfg_attach_with()'s options (NULL: the\n"
		" * defaults); their expect_schema_hash is replaced by the header's. */\n"
		"static inline int %s_attach_with(const char *name, const shmcfg_attach_opts *opts, shmcfg **ret)\n"
		"{\n"
		"\tshmcfg_attach_opts o = {0, NULL, 0};\n"
		"\tif (opts)\n"
		"\t\to = *opts;\n"
		"\to.expect_schema_hash = %s_schema_hash;\n"
		"\treturn shmcfg_attach_with(name, &o, ret);\n"
		"}\n\n"
		"/* For a handle attached another way (shmcfg_create(), shmcfg_attach()\n"
		" * without the hash): 0 if its schema is this header's, else\n"
		" * SHMCFG_E_SCHEMA. Use the accessors on it only after 0. */\n"
		"static inline int %s_check(const shmcfg *h)\n"
		"{\n"
		"\tuint8_t hash[16];\n"
		"\tshmcfg_schema_hash(h, hash);\n"
		"\treturn __builtin_memcmp(hash, %s_schema_hash, 16) == 0 ? 0 : SHMCFG_E_SCHEMA;\n"
		"}\n\n",
		p, p, p, p, p, p, p);
}

static void emit_xmacro(struct gen *g)
{
	FILE *f = g->f;
	fprintf(f, "/* X(id, field, \"name\", TYPE, nullable) for each accessor %s_id and its\n"
		   " * field of struct %s_values: TYPE is BOOL, INT or FLOAT (SHMCFG_##TYPE),\n"
		   " * nullable 0 or 1. */\n#define %s_ACCESSORS(X)",
		g->prefix, g->prefix, g->upper);
	for (size_t i = 0; i < g->n; i++) {
		const struct gopt *o = &g->o[i];
		if (o->scalar)
			fprintf(f, " \\\n\tX(%s, %s, \"%s\", %s, %d)", o->cname, o->field, o->info.name,
				tname(o->info.type), o->nullable);
	}
	fprintf(f, "\n\n#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

/* ------------------------------------------------------------------ */
/* The command                                                        */
/* ------------------------------------------------------------------ */

int cmd_header(int argc, char **argv)
{
	struct gen g = {.prefix = "cfg"};
	const char *out_path = NULL, *schema_path = NULL;
	const char **only = calloc((size_t)argc + 1, sizeof *only);
	char **shape = calloc((size_t)argc + 1, sizeof *shape); /* the banner's arguments */
	size_t nonly = 0;
	int c, ec = 0, r = EXIT_FAIL;
	if (!only || !shape) {
		free(only);
		free(shape);
		return fail("out of memory");
	}
	char *file_base = NULL;
	while ((c = next_opt(argc, argv, &ec)) != -1) {
		switch (c) {
		case -2:
			r = ec;
			goto out;
		case 'p':
			if (!is_ident(optarg) || strlen(optarg) > 64) {
				r = usage_error("--prefix takes a C identifier of at most 64 characters, not '%s'",
						optarg);
				goto out;
			}
			g.prefix = optarg;
			break;
		case 'S':
			free((char *)g.strip); /* the last --strip counts */
			g.strip = optarg[0] && optarg[strlen(optarg) - 1] == '.' ? strndup(optarg, strlen(optarg) - 1)
									    : strdup(optarg);
			if (!g.strip) { /* else the header would silently keep the prefix */
				r = fail("out of memory");
				goto out;
			}
			break;
		case 'n':
			only[nonly++] = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 's':
			schema_path = optarg;
			break;
		}
		/* the options that shape the text, for the banner (not -o, not the source) */
		if (c == 'p' || c == 'S' || c == 'n') {
			shape[g.argc++] = (char *)(c == 'p' ? "--prefix" : c == 'S' ? "--strip" : "--only");
			shape[g.argc++] = optarg;
		}
	}
	g.argv = shape;
	if (argc - optind > 1) {
		r = usage_error("unexpected argument '%s'", argv[optind + 1]);
		goto out;
	}
	const char *seg = optind < argc ? argv[optind] : NULL;
	if (seg && schema_path) {
		r = usage_error("give a segment NAME or --schema FILE, not both");
		goto out;
	}
	char source[512];
	int lr;
	if (seg) {
		if ((r = open_segment(seg, true, &g.h)))
			goto out;
		snprintf(source, sizeof source, "segment %s", seg);
	} else {
		shmcfg_schema *schema = NULL;
		if (schema_path && (lr = shmcfg_schema_load(schema_path, &schema))) {
			r = fail_lib(lr, schema_path); /* the file, or where a name was looked for */
			goto out;
		}
		lr = private_segment(schema, &g.h);
		shmcfg_schema_free(schema);
		if (lr) {
			r = fail_lib(lr, schema_path ? schema_path : "the embedded default schema");
			goto out;
		}
		if (schema_path) {
			file_base = strdup(schema_path);
			snprintf(source, sizeof source, "the schema file %s", file_base ? basename(file_base) : "?");
		} else
			snprintf(source, sizeof source, "the embedded default schema");
	}
	g.source = source;
	g.upper = strdup(g.prefix);
	uint32_t count = shmcfg_count(g.h);
	g.o = calloc(count ? count : 1, sizeof *g.o);
	bool *used = calloc(nonly ? nonly : 1, sizeof *used);
	if (!g.upper || !g.o || !used) {
		free(used);
		r = fail("out of memory");
		goto out;
	}
	for (char *q = g.upper; *q; q++)
		if ('a' <= *q && *q <= 'z')
			*q = (char)(*q - 'a' + 'A');
	for (shmcfg_opt i = 0; i < count; i++) {
		struct gopt *o = &g.o[g.n];
		if ((lr = shmcfg_opt_info(g.h, i, &o->info))) {
			free(used);
			r = fail_lib(lr, "option info");
			goto out;
		}
		bool want = nonly == 0;
		for (size_t k = 0; k < nonly; k++)
			if (fnmatch(only[k], o->info.name, 0) == 0)
				want = used[k] = true;
		if (!want)
			continue;
		o->id = i;
		shmcfg_optinfo fin;
		if (o->info.alias != SHMCFG_NO_OPT && o->info.alias < count &&
		    shmcfg_opt_info(g.h, o->info.alias, &fin) == 0)
			o->alias = fin.name;
		if (o->info.alias_final != i && o->info.alias_final < count &&
		    shmcfg_opt_info(g.h, o->info.alias_final, &fin) == 0) {
			o->def = fin.def;
			o->nullable = (o->info.flags | fin.flags) & SHMCFG_F_NULLABLE;
		} else {
			o->def = o->info.def;
			o->nullable = o->info.flags & SHMCFG_F_NULLABLE;
		}
		o->scalar = o->info.type == SHMCFG_BOOL || o->info.type == SHMCFG_INT ||
			    o->info.type == SHMCFG_FLOAT;
		if (!(o->cname = c_name(o->info.name, g.strip))) {
			free(used);
			r = fail("option name '%s' is not made of C identifiers joined by dots", o->info.name);
			goto out;
		}
		o->field = is_reserved(o->cname) ? NULL : strdup(o->cname);
		if (!o->field && asprintf(&o->field, "%s_", o->cname) < 0)
			o->field = NULL;
		if (!o->field) {
			free(used);
			r = fail("out of memory");
			goto out;
		}
		g.n++;
		g.nscalar += o->scalar;
	}
	for (size_t k = 0; k < nonly; k++)
		if (!used[k]) {
			free(used);
			r = fail("--only '%s' matches no option of %s", only[k], source);
			goto out;
		}
	free(used);
	if ((r = check_idents(&g)))
		goto out;
	if (g.nscalar > 64)
		warn_msg("%s_read() loads %zu cells under one stamp check: choose the options a program "
			 "reads together with --only",
			 g.prefix, g.nscalar);
	char *text = NULL;
	size_t len = 0;
	if (!(g.f = open_memstream(&text, &len))) {
		r = fail("out of memory");
		goto out;
	}
	emit_banner(&g);
	emit_handles(&g);
	emit_options(&g);
	emit_accessors(&g);
	emit_batch(&g);
	emit_attach(&g);
	emit_xmacro(&g);
	bool ok = !ferror(g.f);
	if (fclose(g.f) != 0 || !ok || !text) {
		free(text);
		r = fail("out of memory");
		goto out;
	}
	if (out_path)
		r = write_file(out_path, text, len);
	else {
		fwrite(text, 1, len, stdout);
		r = EXIT_OK;
	}
	free(text);
out:
	for (size_t i = 0; i < g.n; i++) {
		free(g.o[i].cname);
		free(g.o[i].field);
	}
	free(g.o);
	free(g.upper);
	free((char *)g.strip);
	free(file_base);
	free(only);
	free(shape);
	shmcfg_close(g.h);
	return r;
}

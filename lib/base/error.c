/* SPDX-License-Identifier: MIT */
/* Error codes, the per-thread detail text and the log callback. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

__thread char shmcfg__detail[512]; /* the detail text: see SHMCFG_API_ENTRY */
/* public calls in progress on this thread, and whether the detail holds a
 * text: initial-exec, so that entering a public call costs no
 * __tls_get_addr (the detail itself is only touched when it holds one) */
__thread unsigned shmcfg__api_depth __attribute__((tls_model("initial-exec")));
__thread bool shmcfg__detail_set __attribute__((tls_model("initial-exec")));
/* The thread's snapshot pin (read/tpin.c), here because a detail drops it:
 * the inline acquire (shmcfg.h), which clears no detail, is then not taken
 * until a call of the library has cleared it and cached the pin again. */
static struct shmcfg__tpin no_pin, none_pin; /* of no handle: cur_ptr NULL */
const uintptr_t shmcfg__no_tp = (uintptr_t)&no_pin, shmcfg__none_tp = (uintptr_t)&none_pin;
__thread uintptr_t shmcfg__tls_pin __attribute__((tls_model("initial-exec"))) = (uintptr_t)&no_pin;
static shmcfg_log_fn *log_fn;
static void *log_ud;

#define ERR_TEXT(name, off, text) [off] = text,
static const char *const err_text[] = {SHMCFG_ERRNO_MAP(ERR_TEXT)};
#define ERR_NAME(name, off, text) [off] = "SHMCFG_E_" #name,
static const char *const err_name[] = {SHMCFG_ERRNO_MAP(ERR_NAME)};

const char *shmcfg_strerror(int err)
{
	if (err >= SHMCFG_E_FIRST && err <= SHMCFG_E_LAST)
		return err_text[err - SHMCFG_E_FIRST];
	if (err == 0)
		return "success";
	/* errors are negative: a positive value is a result (a getter's
	 * SHMCFG_NULL), never an errno (1 would read "Operation not permitted") */
	if (err == SHMCFG_NULL)
		return "value is null (not an error)";
	if (err > 0)
		return "not an error";
	return strerror(-err);
}

const char *shmcfg_errname(int err)
{
	if (err >= SHMCFG_E_FIRST && err <= SHMCFG_E_LAST)
		return err_name[err - SHMCFG_E_FIRST];
	if (err == 0)
		return "OK";
	if (err == SHMCFG_NULL) /* positive: a result, not an errno (see above) */
		return "SHMCFG_NULL";
	if (err > 0)
		return "OK";
	const char *n = strerrorname_np(-err);
	return n ? n : "EUNKNOWN";
}

const char *shmcfg_errdetail(void)
{
	return shmcfg__detail;
}

/* Set the detail text; the arguments may include the old detail, so the
 * text is formatted aside first. */
int shmcfg__err(int code, const char *fmt, ...)
{
	char text[sizeof shmcfg__detail];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	memcpy(shmcfg__detail, text, sizeof shmcfg__detail);
	shmcfg__detail_set = true;
	shmcfg__tls_pin = (uintptr_t)&no_pin;
	return code;
}

int shmcfg__nomem(void)
{
	return shmcfg__err(-ENOMEM, "out of memory");
}

void shmcfg__clear_err(void)
{
	shmcfg__detail[0] = 0;
	shmcfg__detail_set = false;
}

void shmcfg_set_log(shmcfg_log_fn *fn, void *userdata)
{
	SHMCFG_API_KEEP;
	log_fn = fn;
	log_ud = userdata;
}

void shmcfg__log(int level, const char *fmt, ...)
{
	if (!log_fn)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_fn(level, msg, log_ud);
}

const char *shmcfg_version(int *major, int *minor, int *patch)
{
	if (major)
		*major = SHMCFG_VERSION_MAJOR;
	if (minor)
		*minor = SHMCFG_VERSION_MINOR;
	if (patch)
		*patch = SHMCFG_VERSION_PATCH;
	return SHMCFG_VERSION_STRING;
}

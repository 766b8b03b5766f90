/* Which of Intel's Processor Trace errata a processor has, by its CPUID family and model:
 * the models each erratum lists (Intel's specification updates; libipt's pt_cpu_errata
 * gives the same). Only the errata whose sequences have another reading on other
 * processors are here (enum tk_ipt_erratum), and SKL168, which changes how dump's time
 * columns calibrate. */
#include <stdio.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "tracekit/ipt.h"

#define SKD007 TK_IPT_ERRATUM_SKD007
#define SKZ84 TK_IPT_ERRATUM_SKZ84
#define SKD022 TK_IPT_ERRATUM_SKD022
#define BDM64 TK_IPT_ERRATUM_BDM64
#define SKL168 TK_IPT_ERRATUM_SKL168
#define SKL014 TK_IPT_ERRATUM_SKL014
#define SKL_CLIENT (SKD007 | SKD022 | SKL168 | SKL014)

static const struct {
	uint16_t family, model;
	uint32_t errata;
} cpus[] = {
	/* Broadwell */
	{ 6, 0x3d, BDM64 }, { 6, 0x47, BDM64 }, { 6, 0x4f, BDM64 }, { 6, 0x56, BDM64 },
	/* Skylake, Kaby Lake, Coffee Lake, Comet Lake clients */
	{ 6, 0x4e, SKL_CLIENT }, { 6, 0x5e, SKL_CLIENT }, { 6, 0x8e, SKL_CLIENT },
	{ 6, 0x9e, SKL_CLIENT }, { 6, 0xa5, SKL_CLIENT }, { 6, 0xa6, SKL_CLIENT },
	/* Skylake, Cascade Lake, Ice Lake servers */
	{ 6, 0x55, SKD022 | SKZ84 | SKL014 }, { 6, 0x6a, SKD022 | SKZ84 | SKL014 },
	{ 6, 0x6c, SKD022 | SKZ84 | SKL014 },
	/* Sapphire Rapids, Emerald Rapids, Granite Rapids */
	{ 6, 0x8f, SKD022 | SKZ84 }, { 6, 0xcf, SKD022 | SKZ84 },
	{ 6, 0xad, SKD022 | SKZ84 }, { 6, 0xae, SKD022 | SKZ84 },
	/* Cannon Lake, Ice Lake and Tiger Lake clients, Lakefield */
	{ 6, 0x66, SKD022 | SKL014 }, { 6, 0x7d, SKD022 | SKL014 }, { 6, 0x7e, SKD022 | SKL014 },
	{ 6, 0x8c, SKD022 | SKL014 }, { 6, 0x8d, SKD022 | SKL014 }, { 6, 0xa7, SKD022 | SKL014 },
	{ 6, 0xa8, SKD022 | SKL014 },
	/* Alder Lake, Raptor Lake, Meteor Lake, Arrow Lake, Lunar Lake, Panther Lake */
	{ 6, 0x97, SKD022 }, { 6, 0x9a, SKD022 }, { 6, 0xba, SKD022 }, { 6, 0xb7, SKD022 },
	{ 6, 0xbf, SKD022 }, { 6, 0xc5, SKD022 }, { 6, 0xc6, SKD022 }, { 6, 0xb5, SKD022 },
	{ 6, 0xaa, SKD022 }, { 6, 0xac, SKD022 }, { 6, 0xbd, SKD022 }, { 6, 0xcc, SKD022 },
	{ 6, 0xd5, SKD022 },
	/* families 18 and 19 */
	{ 18, 0x01, SKD022 }, { 18, 0x03, SKD022 }, { 19, 0x01, SKD022 | SKZ84 },
};

uint32_t tk_ipt_cpu_errata(unsigned family, unsigned model)
{
	for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++)
		if (cpus[i].family == family && cpus[i].model == model)
			return cpus[i].errata;
	return 0;
}

/* A number of S up to one of STOPS (decimal, or hex with 0x), into *V; the rest in *END. */
static int number(const char *s, const char *stops, unsigned long *v, const char **end)
{
	char *e;

	if (*s < '0' || *s > '9')
		return -1;
	*v = strtoul(s, &e, 0);
	if (e == s || (*e && !strchr(stops, *e)) || *v > 0xffff)
		return -1;
	*end = e;
	return 0;
}

/* This machine's processor (ptxed's --cpu auto): its errata, 0 for another vendor's. */
static uint32_t host_errata(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	char vendor[13];

	if (!__get_cpuid(0, &a, &b, &c, &d))
		return 0;
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = 0;
	if (strcmp(vendor, "GenuineIntel") || !__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	/* the display family and model (the SDM's CPUID leaf 1) */
	unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
	if (family == 0xf)
		family += (a >> 20) & 0xff;
	if (family == 6 || family >= 0xf)
		model |= ((a >> 16) & 0xf) << 4;
	return tk_ipt_cpu_errata(family, model);
#else
	return 0;
#endif
}

int tk_ipt_cpuid_errata(const char *cpuid, uint32_t *errata)
{
	unsigned long family, model;
	const char *comma = cpuid ? strchr(cpuid, ',') : NULL, *e;

	*errata = 0;
	if (!comma || number(comma + 1, ",", &family, &e) < 0 || *e != ',' ||
	    number(e + 1, ",", &model, &e) < 0)
		return -TK_E_INVAL;
	if (!strncmp(cpuid, "GenuineIntel,", 13))
		*errata = tk_ipt_cpu_errata((unsigned)family, (unsigned)model);
	return 0;
}

int tk_ipt_cpu_parse(const char *s, uint32_t *errata)
{
	unsigned long family, model, stepping;
	const char *e;

	*errata = 0;
	if (!s)
		return -TK_E_INVAL;
	if (!strcmp(s, "none"))
		return 0;
	if (!strcmp(s, "auto")) {
		*errata = host_errata();
		return 0;
	}
	if (number(s, "/", &family, &e) < 0 || *e != '/' || number(e + 1, "/", &model, &e) < 0 ||
	    (*e == '/' && number(e + 1, "", &stepping, &e) < 0))
		return -TK_E_INVAL;
	*errata = tk_ipt_cpu_errata((unsigned)family, (unsigned)model);
	return 0;
}

const char *tk_ipt_errata_names(uint32_t errata, char *buf, size_t size)
{
	static const char *const names[] = { "SKD007", "SKZ84", "SKD022", "BDM64", "SKL168", "SKL014" };
	size_t n = 0;

	if (!size)
		return buf;
	buf[0] = 0;
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		if (errata & (1u << i) && n < size)
			n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", names[i]);
	if (!errata)
		snprintf(buf, size, "none");
	return buf;
}

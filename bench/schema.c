/* bench/schema - what a JSON Schema validation costs, and how close its "pattern" matching is to
 * ECMA-262 (the regex dialect JSON Schema specifies, with the "u" flag it recommends).
 *
 * Three figures, in nanoseconds, each the median of --trials runs of --ms milliseconds (the
 * machine is shared):
 *   request   schema/request.json against every line of examples/jobs.jsonl (what ingest does
 *             for each request; that schema has no pattern, so this is the validator itself);
 *   patterns  a pattern-heavy event schema (12 patterns, 15 matches: ASCII and non-ASCII
 *             strings, one of them 1.9 KB) against one realistic event;
 *   compile   compiling that event schema once (what a daemon pays at startup);
 * and the cost of each of the event's patterns alone, to show where the time goes.
 * Then a table of ECMA-262 cases (Unicode, anchors, classes, escapes, quantifiers, lookaround,
 * backreferences, syntax ECMA-262 rejects): each pattern is compiled as a schema and matched,
 * and the outcome compared with what ECMA-262 answers.
 * Uses only the public interface of common/jsonschema.h, so the same program measures any
 * implementation of it. Run from the repository root. Usage:
 *   bench/schema [--trials K] [--ms MS] [--no-cases]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "jsonschema.h"
#include "stats.h"

#define MAX_DOCS 64

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, b_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A structured event of the kind a schema with many patterns guards: ids, timestamps, versions,
 * names, tags and two free texts, ASCII and not. Each field is a string with a pattern; "tags"
 * is an array of four strings under one pattern. */
static const struct {
    const char *name, *pattern, *value;
} fields[] = {
    {"id", "^[A-Za-z0-9_-]{8,64}$", "evt_2026_000123"},
    {"trace_id", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
     "4bf92f35-77b3-4da6-a3ce-929d0e0e4736"},
    {"created", "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?Z$",
     "2026-12-02T10:15:30.123Z"},
    {"email", "^[^@\\s]+@[^@\\s]+\\.[A-Za-z]{2,}$", "oncall@example.com"},
    {"model", "^(gpt|claude|llama|mistral)-[a-z0-9.-]+$", "claude-3-haiku"},
    {"version", "^\\d+\\.\\d+\\.\\d+(-[0-9A-Za-z.-]+)?$", "1.4.2-rc.1"},
    {"region", "^[a-z]{2}-[a-z]+-\\d$", "eu-west-1"},
    {"tags", "^[a-z][a-z0-9-]{0,31}$", "incident"},
    {"city", "^\\S+( \\S+)*$", "S\xc3\xa3o Paulo"},
    {"title", "^[^<>]{1,200}$",
     "R\xc3\xa9sum\xc3\xa9 of the caf\xc3\xa9 outage \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac"},
    {"summary", "^[^<>]*$", NULL /* the long text below */},
    {"ticket", "T-\\d+", "see T-1042"},
};
#define NFIELDS (sizeof fields / sizeof *fields)
static const char *const more_tags[] = {"provider", "retry", "p2"};

static char summary_text[2048];

static const char *field_value(size_t i)
{
    static const char para[] = "The dispatcher lost its connection to the provider at 10:15 and "
                               "retried every call with backoff; no job ran twice, and the "
                               "queue drained within a minute once the link came back. ";
    if (fields[i].value)
        return fields[i].value;
    if (summary_text[0] == '\0') {
        while (strlen(summary_text) + sizeof para < sizeof summary_text)
            strcat(summary_text, para);
    }
    return summary_text;
}

static json_t *event_schema(void)
{
    json_t *props = json_object();
    for (size_t i = 0; i < NFIELDS; i++) {
        json_t *str = json_pack("{s:s, s:s}", "type", "string", "pattern", fields[i].pattern);
        if (strcmp(fields[i].name, "tags") == 0)
            str = json_pack("{s:s, s:i, s:o}", "type", "array", "maxItems", 16, "items", str);
        json_object_set_new(props, fields[i].name, str);
    }
    return json_pack("{s:s, s:b, s:[s,s,s,s], s:o}", "type", "object", "additionalProperties", 0,
                     "required", "id", "trace_id", "created", "model", "properties", props);
}

static json_t *event_doc(void)
{
    json_t *doc = json_object();
    for (size_t i = 0; i < NFIELDS; i++) {
        json_t *val = json_string(field_value(i));
        if (strcmp(fields[i].name, "tags") == 0) {
            val = json_pack("[o]", val);
            for (size_t t = 0; t < sizeof more_tags / sizeof *more_tags; t++)
                json_array_append_new(val, json_string(more_tags[t]));
        }
        json_object_set_new(doc, fields[i].name, val);
    }
    return doc;
}

static sl_schema_t *compile_or_report(json_t *js)
{
    sl_schema_t *schema = NULL;
    char err[256];
    if (sl_schema_compile(js, &schema, err, sizeof err) != SL_OK)
        fprintf(stderr, "schema: compile failed: %s\n", err);
    json_decref(js);
    return schema;
}

/* Reads one document per line of path into docs; returns how many, or -1. */
static int read_lines(const char *path, json_t **docs, int cap)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "schema: cannot open %s (run from the repository root)\n", path);
        return -1;
    }
    char line[65536];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        json_error_t jerr;
        json_t *doc = json_loads(line, 0, &jerr);
        if (doc)
            docs[n++] = doc;
    }
    fclose(f);
    return n;
}

/* How long one trial of one figure runs: long enough for the clock, short enough that a slow
 * implementation still finishes (--ms). */
static double trial_ns = 300e6;

/* ns per validation, validating docs in turn until trial_ns has passed. */
static double time_validations(const sl_schema_t *schema, json_t **docs, int ndocs)
{
    char why[256];
    long count = 0;
    double t0 = now_ns(), t;
    do {
        for (int i = 0; i < 16; i++)
            (void)sl_schema_validate(schema, docs[count++ % ndocs], why, sizeof why);
        t = now_ns() - t0;
    } while (t < trial_ns);
    return t / (double)count;
}

/* ns per compile of schema_js, compiling it until trial_ns has passed. */
static double time_compiles(const json_t *schema_js)
{
    long count = 0;
    double t0 = now_ns(), t;
    do {
        sl_schema_t *schema = NULL;
        (void)sl_schema_compile(schema_js, &schema, NULL, 0);
        sl_schema_free(schema);
        count++;
        t = now_ns() - t0;
    } while (t < trial_ns);
    return t / (double)count;
}

/* ---- ECMA-262 cases --------------------------------------------------------------------- */

enum { NO_MATCH, MATCH, REJECTED };
static const char *const outcome_names[] = {"no match", "match", "rejected"};

/* Expected outcomes are ECMA-262's with the "u" flag, as JSON Schema recommends (checked
 * against a JavaScript engine's RegExp(pattern, "u").test(subject)). */
static const struct {
    const char *group, *pattern, *subject;
    size_t subject_len; /* 0: strlen */
    int want;
} cases[] = {
    {"unicode", "^.$", "\xc3\xa9", 0, MATCH},
    {"unicode", "^.$", "\xf0\x9f\x98\x80", 0, MATCH},
    {"unicode", "^.{3}$", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 0, MATCH},
    {"unicode", "^[\xc3\xa0-\xc3\xbf]+$", "\xc3\xa9\xc3\xa8", 0, MATCH},
    {"unicode", "^\\w$", "\xc3\xa9", 0, NO_MATCH},
    {"unicode", "^\\d$", "\xd9\xa3", 0, NO_MATCH},
    {"unicode", "^\\s$", "\xc2\xa0", 0, MATCH},
    {"unicode", "^\\s$", "\xef\xbb\xbf", 0, MATCH},
    {"unicode", "^\\s$", "\xc2\x85", 0, NO_MATCH},
    {"unicode", "^\\u00e9$", "\xc3\xa9", 0, MATCH},
    {"unicode", "^\\u{1F600}$", "\xf0\x9f\x98\x80", 0, MATCH},
    {"unicode", "^\\uD83D\\uDE00$", "\xf0\x9f\x98\x80", 0, MATCH},
    {"unicode", "^[\\u{1F600}-\\u{1F64F}]$", "\xf0\x9f\x98\x83", 0, MATCH},
    {"unicode", "^\\p{Lu}+$",
     "\xc3\x80"
     "B",
     0, MATCH},
    {"unicode", "^\\p{Script=Greek}+$", "\xce\xb1\xce\xb2", 0, MATCH},
    {"anchors", "^abc$", "abc\n", 0, NO_MATCH},
    {"anchors", "b", "abc", 0, MATCH},
    {"anchors", "^b", "abc", 0, NO_MATCH},
    {"anchors", "b$", "a\0b", 3, MATCH},
    {"anchors", "\\bcat\\b", "a cat sat", 0, MATCH},
    {"anchors", "\\bcat\\b", "concat", 0, NO_MATCH},
    {"anchors", "\\bcaf\\b", "caf\xc3\xa9", 0, MATCH},
    {"dot", "^a.b$", "a\nb", 0, NO_MATCH},
    {"dot", "^a.b$", "a\rb", 0, NO_MATCH},
    {"dot", "^a.b$",
     "a\xe2\x80\xa8"
     "b",
     0, NO_MATCH},
    {"dot", "^a.b$", "a\vb", 0, MATCH},
    {"dot", "^a.b$",
     "a\xc2\x85"
     "b",
     0, MATCH},
    {"classes", "^[\\d.]+$", "1.5", 0, MATCH},
    {"classes", "^[\\D]+$", "ab", 0, MATCH},
    {"classes", "^[\\S]+$", "ab", 0, MATCH},
    {"classes", "^[\\S]+$", "a b", 0, NO_MATCH},
    {"classes", "^[^\\S]$", " ", 0, MATCH},
    {"classes", "^[\\s-]+$", "- ", 0, MATCH},
    {"classes", "a[]", "a", 0, NO_MATCH},
    {"classes", "^[^]$", "\n", 0, MATCH},
    {"classes", "^[\\]\\[^-]+$", "][^-", 0, MATCH},
    {"classes", "^[[:a]+$", ":a[", 0, MATCH},
    {"escapes", "^\\x41$", "A", 0, MATCH},
    {"escapes", "^\\t$", "\t", 0, MATCH},
    {"escapes", "^\\v$", "\v", 0, MATCH},
    {"escapes", "^\\v$", "\n", 0, NO_MATCH},
    {"escapes", "^\\cJ$", "\n", 0, MATCH},
    {"escapes", "^a\\/b$", "a/b", 0, MATCH},
    {"escapes", "^\\0$", "\0", 1, MATCH},
    {"quantifiers", "^a{2,3}$", "aaaa", 0, NO_MATCH},
    {"quantifiers", "^a{2}$", "aa", 0, MATCH},
    {"quantifiers", "^(?:ab)+?$", "abab", 0, MATCH},
    {"quantifiers", "^a*?b$", "aab", 0, MATCH},
    {"lookaround", "^(?=.*\\d)(?=.*[a-z]).{8,}$", "abcdefg1", 0, MATCH},
    {"lookaround", "^(?=.*\\d)(?=.*[a-z]).{8,}$", "abcdefgh", 0, NO_MATCH},
    {"lookaround", "^(?!admin$)[a-z]+$", "admin", 0, NO_MATCH},
    {"lookaround", "^(?!admin$)[a-z]+$", "adam", 0, MATCH},
    {"lookaround", "(?<=\\$)\\d+", "cost $42", 0, MATCH},
    {"lookaround", "(?<=a+)b", "aab", 0, MATCH},
    {"backrefs", "^(\\w)\\1$", "aa", 0, MATCH},
    {"backrefs", "^(\\w)\\1$", "ab", 0, NO_MATCH},
    {"backrefs", "^(?<y>\\d{4})-\\k<y>$", "2024-2024", 0, MATCH},
    {"backrefs", "^(?:(a)|b)\\1$", "b", 0, MATCH},
    {"not ECMA", "(?i)abc", "ABC", 0, REJECTED},
    {"not ECMA", "(?>a)", "a", 0, REJECTED},
    {"not ECMA", "a++", "aa", 0, REJECTED},
    {"not ECMA", "a{", "a{", 0, REJECTED},
    {"not ECMA", "a{,5}", "a{,5}", 0, REJECTED},
    {"not ECMA", "\\h", "h", 0, REJECTED},
    {"not ECMA", "\\Qa\\E", "a", 0, REJECTED},
    {"not ECMA", "a]", "a]", 0, REJECTED},
    {"not ECMA", "(?=a)*b", "b", 0, REJECTED},
};

/* Writes s (n bytes) as a JSON string body, so control characters stay visible. */
static void print_quoted(const char *s, size_t n, int width)
{
    json_t *js = json_stringn(s, n);
    char *text = js ? json_dumps(js, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
    printf(" %-*s", width, text ? text : "?");
    free(text);
    json_decref(js);
}

static int run_cases(void)
{
    size_t ncases = sizeof cases / sizeof *cases, agree = 0;
    printf("\nECMA-262 cases (expected: RegExp(pattern, \"u\"); a pattern is matched anywhere)\n");
    printf(" %-11s %-32s %-18s %-9s %-9s\n", "group", "pattern", "string", "ECMA-262", "here");
    for (size_t i = 0; i < ncases; i++) {
        json_t *schema_js = json_pack("{s:s}", "pattern", cases[i].pattern);
        size_t len = cases[i].subject_len ? cases[i].subject_len : strlen(cases[i].subject);
        json_t *doc = json_stringn(cases[i].subject, len);
        sl_schema_t *schema = NULL;
        char err[256] = "";
        int got = REJECTED;
        if (sl_schema_compile(schema_js, &schema, err, sizeof err) == SL_OK)
            got = sl_schema_validate(schema, doc, NULL, 0) == SL_OK ? MATCH : NO_MATCH;
        agree += got == cases[i].want;
        printf(" %-11s", cases[i].group);
        print_quoted(cases[i].pattern, strlen(cases[i].pattern), 32);
        print_quoted(cases[i].subject, len, 18);
        printf(" %-9s %-9s%s", outcome_names[cases[i].want], outcome_names[got],
               got == cases[i].want ? "" : "  WRONG");
        if (got == REJECTED && cases[i].want != REJECTED)
            printf(" (%s)", err);
        printf("\n");
        sl_schema_free(schema);
        json_decref(doc);
        json_decref(schema_js);
    }
    printf("%zu of %zu cases agree with ECMA-262\n", agree, ncases);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: schema [--trials K (1-99, default 5)] [--ms MS (>= 1, default 300)]"
               " [--no-cases]\n"
               "  ns per validation of schema/request.json (examples/jobs.jsonl) and of a\n"
               "  pattern-heavy schema, ns per compile, ns per match of each of its patterns,\n"
               "  then a table of ECMA-262 pattern cases. Each figure is the median of K\n"
               "  trials of MS milliseconds. Run from the repository root.\n");
}

int main(int argc, char **argv)
{
    int trials = 5, cases_too = 1, rc = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
            trial_ns = atof(argv[++i]) * 1e6;
        } else if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc) {
            trials = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--no-cases") == 0) {
            cases_too = 0;
        } else {
            fprintf(stderr, "schema: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!(trial_ns >= 1e6) || trials < 1 || trials > 99) {
        usage(stderr);
        return 2;
    }

    json_t *jobs[MAX_DOCS];
    int njobs = read_lines("examples/jobs.jsonl", jobs, MAX_DOCS);
    sl_schema_t *request = NULL, *event = NULL;
    char err[256];
    json_t *ev = event_doc(), *ev_schema = event_schema();
    if (njobs <= 0)
        goto out;
    if (sl_schema_load_file("schema/request.json", &request, err, sizeof err) != SL_OK) {
        fprintf(stderr, "schema: %s\n", err);
        goto out;
    }
    event = compile_or_report(json_incref(ev_schema));
    if (!event)
        goto out;
    char why[256] = "";
    if (sl_schema_validate(event, ev, why, sizeof why) != SL_OK) {
        fprintf(stderr, "schema: the benchmark event does not validate: %s\n", why);
        goto out;
    }
    int valid = 0;
    for (int i = 0; i < njobs; i++)
        valid += sl_schema_validate(request, jobs[i], NULL, 0) == SL_OK;

    double req_ns[99], pat_ns[99], comp_ns[99];
    for (int k = 0; k < trials; k++) {
        req_ns[k] = time_validations(request, jobs, njobs);
        pat_ns[k] = time_validations(event, &ev, 1);
        comp_ns[k] = time_compiles(ev_schema);
    }
    char *ev_text = json_dumps(ev, JSON_COMPACT);
    size_t ev_bytes = ev_text ? strlen(ev_text) : 0;
    free(ev_text);
    printf("\nsluice schema benchmark: median of %d trials of %.0f ms each, one thread\n", trials,
           trial_ns / 1e6);
    printf(" %-66s %10s\n", "figure", "ns");
    printf(" %-66s %10.0f\n", "request: schema/request.json, examples/jobs.jsonl, per document",
           median(req_ns, trials));
    printf("   (%d lines, %d of them valid)\n", njobs, valid);
    char label[96];
    snprintf(label, sizeof label, "patterns: a %zu-byte event, 15 pattern matches, per document",
             ev_bytes);
    printf(" %-66s %10.0f\n", label, median(pat_ns, trials));
    snprintf(label, sizeof label, "compile: the event schema (%zu patterns), per compile", NFIELDS);
    printf(" %-66s %10.0f\n", label, median(comp_ns, trials));

    /* Where the pattern time goes: each field's pattern alone against its value. */
    printf("\n %-66s %10s\n", "one pattern against its field's value (bytes)", "ns/match");
    for (size_t i = 0; i < NFIELDS; i++) {
        sl_schema_t *one = compile_or_report(json_pack("{s:s}", "pattern", fields[i].pattern));
        json_t *val = json_string(field_value(i));
        if (!one || sl_schema_validate(one, val, why, sizeof why) != SL_OK) {
            fprintf(stderr, "schema: field %s: %s\n", fields[i].name, one ? why : "no schema");
            sl_schema_free(one);
            json_decref(val);
            goto out;
        }
        double ns[99];
        for (int k = 0; k < trials; k++)
            ns[k] = time_validations(one, &val, 1);
        snprintf(label, sizeof label, "%-9s %-44.44s %5zu", fields[i].name, fields[i].pattern,
                 json_string_length(val));
        printf(" %-66s %10.0f\n", label, median(ns, trials));
        sl_schema_free(one);
        json_decref(val);
    }
    rc = 0;
    if (cases_too)
        rc = run_cases();
out:
    sl_schema_free(request);
    sl_schema_free(event);
    json_decref(ev);
    json_decref(ev_schema);
    for (int i = 0; i < njobs; i++)
        json_decref(jobs[i]);
    return rc;
}

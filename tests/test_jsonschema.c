/* test_jsonschema.c - behaviour of the JSON Schema validator (common/jsonschema.h).
 *
 * Schemas and documents are written with single quotes for readability; J() turns them into
 * double quotes before parsing, so no test text may contain a literal apostrophe.
 */
#include "jsonschema.h"
#include "util.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *J(const char *text)
{
    char *copy = strdup(text);
    ck_assert_ptr_nonnull(copy);
    for (char *c = copy; *c; c++) {
        if (*c == '\'')
            *c = '"';
    }
    json_error_t jerr;
    json_t *js = json_loads(copy, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(js != NULL, "bad test JSON %s: %s", copy, jerr.text);
    free(copy);
    return js;
}

static sl_schema_t *compile_or_die(const char *schema_text, int line)
{
    json_t *js = J(schema_text);
    sl_schema_t *schema = NULL;
    char err[256];
    sl_err_t rc = sl_schema_compile(js, &schema, err, sizeof err);
    json_decref(js);
    ck_assert_msg(rc == SL_OK, "line %d: compile failed: %s", line, err);
    ck_assert_ptr_nonnull(schema);
    return schema;
}

static void expect(const char *schema_text, const char *doc_text, const char *want_why, int line)
{
    sl_schema_t *schema = compile_or_die(schema_text, line);
    json_t *doc = J(doc_text);
    char why[256] = "untouched";
    sl_err_t rc = sl_schema_validate(schema, doc, why, sizeof why);
    if (want_why) {
        ck_assert_msg(rc == SL_ESCHEMA, "line %d: %s accepted %s", line, schema_text, doc_text);
        ck_assert_msg(strcmp(why, want_why) == 0, "line %d: why was '%s', wanted '%s'", line, why,
                      want_why);
    } else {
        ck_assert_msg(rc == SL_OK, "line %d: %s rejected %s: %s", line, schema_text, doc_text, why);
    }
    json_decref(doc);
    sl_schema_free(schema);
}

static void expect_compile_error(const char *schema_text, const char *want_err, int line)
{
    json_t *js = J(schema_text);
    sl_schema_t *schema = (sl_schema_t *)&schema; /* must be reset to NULL */
    char err[256] = "";
    sl_err_t rc = sl_schema_compile(js, &schema, err, sizeof err);
    json_decref(js);
    ck_assert_msg(rc == SL_ESCHEMA, "line %d: %s compiled (rc %d)", line, schema_text, rc);
    ck_assert_msg(schema == NULL, "line %d: *out set on failure", line);
    ck_assert_msg(strstr(err, want_err) != NULL, "line %d: err was '%s', wanted '%s'", line, err,
                  want_err);
}

#define ACCEPTS(schema, doc) expect((schema), (doc), NULL, __LINE__)
#define REJECTS(schema, doc, why) expect((schema), (doc), (why), __LINE__)
#define COMPILE_FAILS(schema, err) expect_compile_error((schema), (err), __LINE__)

/* ---- type ------------------------------------------------------------------------------- */

START_TEST(type_accepts_its_type_and_rejects_others)
{
    ACCEPTS("{'type':'object'}", "{}");
    ACCEPTS("{'type':'array'}", "[]");
    ACCEPTS("{'type':'string'}", "'x'");
    ACCEPTS("{'type':'integer'}", "3");
    ACCEPTS("{'type':'number'}", "3.5");
    ACCEPTS("{'type':'boolean'}", "false");
    ACCEPTS("{'type':'null'}", "null");
    REJECTS("{'type':'object'}", "[]", "/: expected object, got array");
    REJECTS("{'type':'array'}", "{}", "/: expected array, got object");
    REJECTS("{'type':'string'}", "1", "/: expected string, got integer");
    REJECTS("{'type':'boolean'}", "null", "/: expected boolean, got null");
    REJECTS("{'type':'null'}", "true", "/: expected null, got boolean");
    REJECTS("{'type':'number'}", "'1'", "/: expected number, got string");
}
END_TEST

START_TEST(type_array_accepts_any_listed_type)
{
    const char *schema = "{'type':['string','null']}";
    ACCEPTS(schema, "'a'");
    ACCEPTS(schema, "null");
    REJECTS(schema, "0", "/: expected string or null, got integer");
    REJECTS("{'type':['object','string','null']}", "[]",
            "/: expected object, string or null, got array");
}
END_TEST

START_TEST(integer_accepts_integral_reals_and_rejects_fractions)
{
    ACCEPTS("{'type':'integer'}", "-7");
    ACCEPTS("{'type':'integer'}", "2.0");
    ACCEPTS("{'type':'integer'}", "1e300");
    REJECTS("{'type':'integer'}", "2.5", "/: expected integer, got number");
    REJECTS("{'type':'integer'}", "'2'", "/: expected integer, got string");
}
END_TEST

START_TEST(number_accepts_integers_and_reals)
{
    ACCEPTS("{'type':'number'}", "1");
    ACCEPTS("{'type':'number'}", "-0.25");
    REJECTS("{'type':'number'}", "null", "/: expected number, got null");
}
END_TEST

/* ---- objects ---------------------------------------------------------------------------- */

START_TEST(properties_check_only_members_that_are_present)
{
    const char *schema = "{'properties':{'a':{'type':'string'},'b':{'type':'integer'}}}";
    ACCEPTS(schema, "{}");
    ACCEPTS(schema, "{'a':'x','c':[1]}");
    REJECTS(schema, "{'a':'x','b':'y'}", "/b: expected integer, got string");
    ACCEPTS(schema, "[1]"); /* properties constrain objects only */
}
END_TEST

START_TEST(required_reports_the_missing_property)
{
    const char *schema = "{'required':['model','api_key']}";
    ACCEPTS(schema, "{'model':1,'api_key':2}");
    REJECTS(schema, "{'model':1}", "/: missing required property \"api_key\"");
    ACCEPTS(schema, "'not an object'");
}
END_TEST

START_TEST(additional_properties_false_rejects_unlisted_members)
{
    const char *schema = "{'properties':{'a':{}},'additionalProperties':false}";
    ACCEPTS(schema, "{'a':1}");
    REJECTS(schema, "{'a':1,'zz':2}", "/zz: property is not allowed");
}
END_TEST

START_TEST(additional_properties_schema_checks_unlisted_members)
{
    const char *schema = "{'properties':{'a':{}},'additionalProperties':{'type':'number'}}";
    ACCEPTS(schema, "{'a':'listed, so any type','b':1,'c':2.5}");
    REJECTS(schema, "{'a':'x','b':'y'}", "/b: expected number, got string");
    ACCEPTS("{'additionalProperties':true}", "{'x':1}");
}
END_TEST

START_TEST(min_and_max_properties_bound_the_member_count)
{
    ACCEPTS("{'minProperties':1,'maxProperties':2}", "{'a':1}");
    REJECTS("{'minProperties':1}", "{}", "/: object has fewer than 1 properties");
    REJECTS("{'maxProperties':2}", "{'a':1,'b':2,'c':3}", "/: object has more than 2 properties");

    json_t *metadata = json_object();
    for (int i = 0; i < 33; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(metadata, key, json_integer(i));
    }
    json_t *doc = json_pack("{s:o}", "metadata", metadata);
    sl_schema_t *schema =
        compile_or_die("{'properties':{'metadata':{'maxProperties':32}}}", __LINE__);
    char why[128];
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_ESCHEMA);
    ck_assert_str_eq(why, "/metadata: object has more than 32 properties");
    json_object_del(metadata, "k0");
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_OK);
    json_decref(doc);
    sl_schema_free(schema);
}
END_TEST

/* ---- arrays ----------------------------------------------------------------------------- */

START_TEST(items_checks_every_element_and_reports_its_index)
{
    const char *schema = "{'items':{'type':'integer'}}";
    ACCEPTS(schema, "[]");
    ACCEPTS(schema, "[1,2,3]");
    REJECTS(schema, "[1,2,'x',4]", "/2: expected integer, got string");
}
END_TEST

START_TEST(min_and_max_items_bound_the_length)
{
    ACCEPTS("{'minItems':1,'maxItems':2}", "[0]");
    ACCEPTS("{'minItems':1,'maxItems':2}", "[0,1]");
    REJECTS("{'minItems':1}", "[]", "/: array has fewer than 1 items");
    REJECTS("{'maxItems':2}", "[1,2,3]", "/: array has more than 2 items");
}
END_TEST

/* ---- enum and const --------------------------------------------------------------------- */

START_TEST(enum_accepts_only_listed_values)
{
    const char *schema = "{'enum':['user','assistant',1,null,{'a':[1]}]}";
    ACCEPTS(schema, "'user'");
    ACCEPTS(schema, "null");
    ACCEPTS(schema, "1.0"); /* numbers compare by value */
    ACCEPTS(schema, "{'a':[1.0]}");
    REJECTS(schema, "'User'", "/: value is not one of the allowed values");
    REJECTS(schema, "true", "/: value is not one of the allowed values");
    REJECTS(schema, "{'a':[1],'b':2}", "/: value is not one of the allowed values");
    REJECTS("{'enum':[]}", "1", "/: value is not one of the allowed values");
}
END_TEST

START_TEST(const_requires_an_equal_value)
{
    ACCEPTS("{'const':{'x':[1,'a'],'y':null}}", "{'y':null,'x':[1,'a']}");
    REJECTS("{'const':{'x':[1,'a']}}", "{'x':['a',1]}", "/: value is not the required constant");
    ACCEPTS("{'const':2}", "2.0");
    REJECTS("{'const':false}", "0", "/: value is not the required constant");
    ACCEPTS("{'const':null}", "null");
    REJECTS("{'const':null}", "false", "/: value is not the required constant");
}
END_TEST

/* ---- numbers ---------------------------------------------------------------------------- */

START_TEST(minimum_and_maximum_are_inclusive)
{
    const char *schema = "{'minimum':1,'maximum':100000}";
    ACCEPTS(schema, "1");
    ACCEPTS(schema, "100000");
    ACCEPTS(schema, "1.5");
    REJECTS(schema, "0", "/: value is less than the minimum 1");
    REJECTS(schema, "0.999", "/: value is less than the minimum 1");
    REJECTS(schema, "100001", "/: value is greater than the maximum 100000");
    REJECTS("{'maximum':0.5}", "0.75", "/: value is greater than the maximum 0.5");
    ACCEPTS(schema, "'bounds only constrain numbers'");
}
END_TEST

START_TEST(exclusive_bounds_exclude_the_limit)
{
    const char *schema = "{'exclusiveMinimum':0,'exclusiveMaximum':2.5}";
    ACCEPTS(schema, "1");
    ACCEPTS(schema, "2.4");
    REJECTS(schema, "0", "/: value is not greater than the exclusive minimum 0");
    REJECTS(schema, "0.0", "/: value is not greater than the exclusive minimum 0");
    REJECTS(schema, "2.5", "/: value is not less than the exclusive maximum 2.5");
}
END_TEST

START_TEST(bounds_compare_large_integers_exactly)
{
    /* As doubles both numbers are 2^63; compared as integers they differ. */
    REJECTS("{'minimum':9223372036854775807}", "9223372036854775806",
            "/: value is less than the minimum 9223372036854775807");
    ACCEPTS("{'maximum':9007199254740993}", "9007199254740992.0");
    REJECTS("{'maximum':9007199254740992}", "9007199254740993",
            "/: value is greater than the maximum 9007199254740992");
    REJECTS("{'exclusiveMaximum':9.2e18}", "9223372036854775807",
            "/: value is not less than the exclusive maximum 9.2e+18");
    /* The real is 2^63 exactly, one more than the integer. */
    ACCEPTS("{'exclusiveMaximum':9223372036854775807.0}", "9223372036854775807");
    REJECTS("{'minimum':-9223372036854775808.0}", "-9.3e18",
            "/: value is less than the minimum -9.2233720368547758e+18");
}
END_TEST

/* ---- strings ---------------------------------------------------------------------------- */

START_TEST(string_length_counts_code_points_not_bytes)
{
    ACCEPTS("{'maxLength':3}", "'h\\u00e9\\u00e9'"); /* 5 bytes */
    ACCEPTS("{'maxLength':1}", "'\\ud83d\\ude00'");  /* 4 bytes */
    REJECTS("{'maxLength':3}", "'\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00'",
            "/: string is longer than 3 characters");
    REJECTS("{'minLength':2}", "'\\u00e9'", "/: string is shorter than 2 characters");
    ACCEPTS("{'minLength':2}", "'\\u00e9\\u00e9'");
    REJECTS("{'minLength':1}", "''", "/: string is shorter than 1 characters");
    ACCEPTS("{'minLength':1,'maxLength':1}", "'\\u0000'"); /* an embedded NUL is a character */
}
END_TEST

START_TEST(pattern_matches_anywhere_unless_anchored)
{
    ACCEPTS("{'pattern':'b+'}", "'abbbc'");
    REJECTS("{'pattern':'^b+$'}", "'abbbc'", "/: string does not match the pattern \"^b+$\"");
    ACCEPTS("{'pattern':'^[a-z]{2,4}$'}", "'abc'");
    REJECTS("{'pattern':'^[a-z]{2,4}$'}", "'abcde'",
            "/: string does not match the pattern \"^[a-z]{2,4}$\"");
    ACCEPTS("{'pattern':'^(cat|dog)s?$'}", "'dogs'");
    ACCEPTS("{'pattern':'x'}", "3"); /* pattern constrains strings only */
    /* The whole string is searched, even past an embedded NUL. */
    ACCEPTS("{'pattern':'b$'}", "'a\\u0000b'");
}
END_TEST

START_TEST(pattern_translates_ecma_escapes_and_classes)
{
    ACCEPTS("{'pattern':'^\\\\d{3}-\\\\d{4}$'}", "'555-1234'");
    REJECTS("{'pattern':'^\\\\d+$'}", "'12d'", "/: string does not match the pattern \"^\\\\d+$\"");
    ACCEPTS("{'pattern':'^\\\\w+$'}", "'snake_case_9'");
    REJECTS("{'pattern':'^\\\\w+$'}", "'kebab-case'",
            "/: string does not match the pattern \"^\\\\w+$\"");
    ACCEPTS("{'pattern':'^\\\\S+\\\\s\\\\S+$'}", "'two\\twords'");
    ACCEPTS("{'pattern':'^\\\\s$'}", "'\\u00a0'");
    ACCEPTS("{'pattern':'^a\\\\.b$'}", "'a.b'");
    REJECTS("{'pattern':'^a\\\\.b$'}", "'axb'",
            "/: string does not match the pattern \"^a\\\\.b$\"");
    /* In ECMA, \\- inside a class is a dash; a POSIX bracket would also take the backslash. */
    ACCEPTS("{'pattern':'^[a\\\\-_]+$'}", "'a-_a'");
    REJECTS("{'pattern':'^[a\\\\-_]+$'}", "'a\\\\'",
            "/: string does not match the pattern \"^[a\\\\-_]+$\"");
    ACCEPTS("{'pattern':'^[\\\\d.]+$'}", "'1.5'");
    ACCEPTS("{'pattern':'^[\\\\]\\\\[^-]+$'}", "'][^-'");
    REJECTS("{'pattern':'^[^\\\\^]$'}", "'^'",
            "/: string does not match the pattern \"^[^\\\\^]$\"");
    ACCEPTS("{'pattern':'^[\\\\^]$'}", "'^'");
    ACCEPTS("{'pattern':'^(?:ab)+?$'}", "'abab'");
    ACCEPTS("{'pattern':'^a{2}$'}", "'aa'");
    ACCEPTS("{'pattern':'^a\\\\{2\\\\}$'}", "'a{2}'");
    /* "." is one code point, never a line terminator. */
    ACCEPTS("{'pattern':'^.{2}$'}", "'\\u00e9\\u20ac'");
    REJECTS("{'pattern':'^a.b$'}", "'a\\nb'", "/: string does not match the pattern \"^a.b$\"");
    ACCEPTS("{'pattern':'^[^<>]{1,3}$'}", "'\\u00e9\\u00e9\\u00e9'");
    /* A quantifier repeats a whole non-ASCII character, for ASCII and non-ASCII input alike. */
    ACCEPTS("{'pattern':'^a\\u00e9?b$'}", "'ab'");
    ACCEPTS("{'pattern':'^a\\u00e9?b$'}", "'a\\u00e9b'");
    ACCEPTS("{'pattern':'^\\u00e9+$'}", "'\\u00e9\\u00e9\\u00e9'");
    REJECTS("{'pattern':'^[^\\u00e9]+$'}", "'a\\u00e9c'",
            "/: string does not match the pattern \"^[^\u00e9]+$\"");
    ACCEPTS("{'pattern':'^[^\\u00e9]+$'}", "'abc'");
    ACCEPTS("{'pattern':'^[^a]$'}", "'\\u20ac'");
}
END_TEST

/* ECMA-262 that the former POSIX translation refused; each line was a COMPILE_FAILS there. */
START_TEST(pattern_supports_lookaround_backreferences_and_escapes)
{
    ACCEPTS("{'pattern':'^(?=a)'}", "'abc'");
    REJECTS("{'pattern':'^(?=a)'}", "'bc'", "/: string does not match the pattern \"^(?=a)\"");
    ACCEPTS("{'pattern':'(?<year>\\\\d{4})'}", "'in 2024'");
    REJECTS("{'pattern':'(?<year>\\\\d{4})'}", "'in 24'",
            "/: string does not match the pattern \"(?<year>\\\\d{4})\"");
    ACCEPTS("{'pattern':'\\\\bword\\\\b'}", "'a word here'");
    REJECTS("{'pattern':'\\\\bword\\\\b'}", "'swordfish'",
            "/: string does not match the pattern \"\\\\bword\\\\b\"");
    ACCEPTS("{'pattern':'(a)\\\\1'}", "'xaay'");
    REJECTS("{'pattern':'(a)\\\\1'}", "'xay'", "/: string does not match the pattern \"(a)\\\\1\"");
    ACCEPTS("{'pattern':'\\\\u0041'}", "'xAy'");
    REJECTS("{'pattern':'\\\\u0041'}", "'xay'",
            "/: string does not match the pattern \"\\\\u0041\"");
    ACCEPTS("{'pattern':'^[\\\\D]+$'}", "'ab'");
    REJECTS("{'pattern':'^[\\\\D]+$'}", "'a1'",
            "/: string does not match the pattern \"^[\\\\D]+$\"");
    /* [] matches nothing, [^] any character. */
    REJECTS("{'pattern':'a[]'}", "'a'", "/: string does not match the pattern \"a[]\"");
    ACCEPTS("{'pattern':'^[^]$'}", "'\\n'");
    ACCEPTS("{'pattern':'^[\\u00e0-\\u00ff]+$'}", "'\\u00e9\\u00e8'");
    REJECTS("{'pattern':'^[\\u00e0-\\u00ff]+$'}", "'ea'",
            "/: string does not match the pattern \"^[\u00e0-\u00ff]+$\"");
    /* Lookbehind, negative lookahead, named backreferences, and a backreference to a group that
     * did not take part, which matches the empty string. */
    ACCEPTS("{'pattern':'(?<=\\\\$)\\\\d+'}", "'cost $42'");
    REJECTS("{'pattern':'^(?!admin$)[a-z]+$'}", "'admin'",
            "/: string does not match the pattern \"^(?!admin$)[a-z]+$\"");
    ACCEPTS("{'pattern':'^(?<y>\\\\d{4})-\\\\k<y>$'}", "'2024-2024'");
    ACCEPTS("{'pattern':'^(?:(a)|b)\\\\1$'}", "'b'");
    ACCEPTS("{'pattern':'^\\\\x41\\\\cJ\\\\0$'}", "'A\\n\\u0000'");
    ACCEPTS("{'pattern':'^a*?b$'}", "'aab'");
}
END_TEST

/* Where PCRE2 on its own would read a pattern otherwise than ECMA-262 does. */
START_TEST(pattern_keeps_ecma_262_meaning_where_pcre2_differs)
{
    /* \d \w \b are ASCII-only in ECMA-262, even with the "u" flag. */
    REJECTS("{'pattern':'^\\\\d$'}", "'\\u0663'",
            "/: string does not match the pattern \"^\\\\d$\"");
    REJECTS("{'pattern':'^\\\\w$'}", "'\\u00e9'",
            "/: string does not match the pattern \"^\\\\w$\"");
    ACCEPTS("{'pattern':'\\\\bcaf\\\\b'}", "'caf\\u00e9'");
    /* \s is ECMA-262 white space, inside classes too; \S and [^\s] are its complement. */
    ACCEPTS("{'pattern':'^\\\\s$'}", "'\\ufeff'");
    REJECTS("{'pattern':'^\\\\s$'}", "'\\u0085'",
            "/: string does not match the pattern \"^\\\\s$\"");
    ACCEPTS("{'pattern':'^[\\\\s-]+$'}", "'-\\u3000-'");
    ACCEPTS("{'pattern':'^[\\\\S]+$'}", "'a\\u0085\\ud83d\\ude00'");
    REJECTS("{'pattern':'^[\\\\S]+$'}", "'a\\u2028b'",
            "/: string does not match the pattern \"^[\\\\S]+$\"");
    ACCEPTS("{'pattern':'^[^\\\\S]$'}", "'\\u00a0'");
    /* \v is the vertical tab only; "." excludes exactly \n \r U+2028 U+2029. */
    ACCEPTS("{'pattern':'^\\\\v$'}", "'\\u000b'");
    REJECTS("{'pattern':'^\\\\v$'}", "'\\n'", "/: string does not match the pattern \"^\\\\v$\"");
    ACCEPTS("{'pattern':'^a.b$'}", "'a\\u000bb'");
    ACCEPTS("{'pattern':'^a.b$'}", "'a\\u0085b'");
    REJECTS("{'pattern':'^a.b$'}", "'a\\rb'", "/: string does not match the pattern \"^a.b$\"");
    REJECTS("{'pattern':'^a.b$'}", "'a\\u2028b'", "/: string does not match the pattern \"^a.b$\"");
    /* "$" matches only at the very end, not before a final newline. */
    REJECTS("{'pattern':'^abc$'}", "'abc\\n'", "/: string does not match the pattern \"^abc$\"");
    /* Code points: astral characters, \u{...}, a surrogate pair, properties. */
    ACCEPTS("{'pattern':'^.$'}", "'\\ud83d\\ude00'");
    ACCEPTS("{'pattern':'^\\\\u{1F600}$'}", "'\\ud83d\\ude00'");
    ACCEPTS("{'pattern':'^\\\\uD83D\\\\uDE00$'}", "'\\ud83d\\ude00'");
    ACCEPTS("{'pattern':'^[\\\\u{1F600}-\\\\u{1F64F}]$'}", "'\\ud83d\\ude03'");
    ACCEPTS("{'pattern':'^\\\\p{Lu}+$'}", "'\\u00c0B'");
    REJECTS("{'pattern':'^\\\\p{Lu}+$'}", "'\\u00e0B'",
            "/: string does not match the pattern \"^\\\\p{Lu}+$\"");
    /* "[" inside a class is a character, not the start of a POSIX class. */
    ACCEPTS("{'pattern':'^[[:digit:]+$'}", "'[:dig'");
    REJECTS("{'pattern':'^[[:digit:]+$'}", "'5'",
            "/: string does not match the pattern \"^[[:digit:]+$\"");
}
END_TEST

START_TEST(pattern_that_is_not_ecma_262_is_rejected_at_compile)
{
    COMPILE_FAILS("{'pattern':'a{'}", "/pattern: a literal { must be escaped");
    COMPILE_FAILS("{'pattern':'[abc'}", "/pattern: unterminated");
    COMPILE_FAILS("{'pattern':'(ab'}", "/pattern: invalid pattern:");
    COMPILE_FAILS("{'pattern':'[z-a]'}", "/pattern: range out of order");
    COMPILE_FAILS("{'pattern':'abc\\\\'}", "/pattern: pattern ends with a backslash");
    /* PCRE2 syntax with no ECMA-262 meaning. */
    COMPILE_FAILS("{'pattern':'a{,5}'}", "/pattern: a literal { must be escaped");
    COMPILE_FAILS("{'pattern':'(?i)abc'}", "/pattern: unsupported group");
    COMPILE_FAILS("{'pattern':'(?>a)'}", "/pattern: unsupported group");
    COMPILE_FAILS("{'pattern':'(*ACCEPT)a'}", "/pattern: nothing to repeat after (");
    COMPILE_FAILS("{'pattern':'a++'}", "/pattern: a quantifier cannot follow another quantifier");
    COMPILE_FAILS("{'pattern':'a{2}{3}'}", "/pattern: a quantifier cannot follow another");
    COMPILE_FAILS("{'pattern':'a*?"
                  "?'}",
                  "/pattern: a quantifier cannot follow another");
    COMPILE_FAILS("{'pattern':'x\\\\h'}",
                  "/pattern: unsupported escape (not ECMA-262) at offset 1");
    COMPILE_FAILS("{'pattern':'\\\\Qa\\\\E'}", "/pattern: unsupported escape");
    COMPILE_FAILS("{'pattern':'[\\\\B]'}", "/pattern: unsupported escape");
    COMPILE_FAILS("{'pattern':'\\\\012'}", "/pattern: octal escapes are not ECMA-262");
    COMPILE_FAILS("{'pattern':'\\\\x4'}", "/pattern: \\x must be followed by two hex digits");
    COMPILE_FAILS("{'pattern':'\\\\u12'}", "/pattern: \\u must be followed by four hex digits");
    COMPILE_FAILS("{'pattern':'\\\\u{110000}'}", "/pattern: \\u must be followed by");
    COMPILE_FAILS("{'pattern':'\\\\c1'}", "/pattern: \\c must be followed by a letter");
    COMPILE_FAILS("{'pattern':'\\\\pL'}", "/pattern: \\p and \\P must be followed by {property}");
    COMPILE_FAILS("{'pattern':'\\\\k'}", "/pattern: \\k must be followed by <name>");
    COMPILE_FAILS("{'pattern':'[\\\\1]'}", "/pattern: backreferences cannot appear inside [...]");
    COMPILE_FAILS("{'pattern':'[\\\\d-z]'}",
                  "/pattern: a class escape cannot start or end a range");
    /* What PCRE2 itself refuses is reported with its message, at the offset in the pattern as
     * written (the rewriting of "." and \s does not shift it). */
    COMPILE_FAILS("{'pattern':'\\\\p{NoSuchProperty}'}",
                  "/pattern: invalid pattern: unknown property");
    COMPILE_FAILS("{'pattern':'(a)\\\\2'}", "/pattern: invalid pattern: reference to non-existent");
    COMPILE_FAILS(
        "{'pattern':'\\\\s.(?<=a+)b'}",
        "/pattern: invalid pattern: lookbehind assertion is not fixed length at offset 3");
    COMPILE_FAILS("{'pattern':'..(ab'}",
                  "/pattern: invalid pattern: missing closing parenthesis at offset 5");
}
END_TEST

START_TEST(pattern_length_is_bounded)
{
    char text[SL_SCHEMA_MAX_PATTERN_LEN + 32];
    memset(text, 'a', sizeof text);
    memcpy(text, "{'pattern':'", 12);
    memcpy(text + 12 + SL_SCHEMA_MAX_PATTERN_LEN, "'}", 3);
    sl_schema_t *schema = compile_or_die(text, __LINE__);
    sl_schema_free(schema);
    memcpy(text + 12 + SL_SCHEMA_MAX_PATTERN_LEN, "a'}", 4);
    COMPILE_FAILS(text, "/pattern: pattern is longer than 4096 bytes");
}
END_TEST

/* A pattern of depth groups around "a": "((a))" for 2. The caller frees it. */
static char *nested_groups(int depth)
{
    char *p = malloc((size_t)depth * 2 + 2);
    ck_assert_ptr_nonnull(p);
    memset(p, '(', (size_t)depth);
    p[depth] = 'a';
    memset(p + depth + 1, ')', (size_t)depth);
    p[2 * depth + 1] = '\0';
    return p;
}

START_TEST(pattern_nesting_is_bounded)
{
    char why[256];
    sl_ecmare_t *re = NULL;
    char *ok = nested_groups(SL_ECMARE_MAX_NESTING);
    ck_assert_msg(sl_ecmare_compile(ok, strlen(ok), &re, why, sizeof why) == SL_OK, "%s", why);
    ck_assert_int_eq(sl_ecmare_match(re, "xa", 2, why, sizeof why), 1);
    sl_ecmare_free(re);
    re = NULL;
    char *deep = nested_groups(SL_ECMARE_MAX_NESTING + 1);
    ck_assert_int_eq(sl_ecmare_compile(deep, strlen(deep), &re, why, sizeof why), SL_ESCHEMA);
    ck_assert_ptr_null(re);
    ck_assert_str_eq(why, "groups are nested more than 32 deep at offset 32");
    /* Groups side by side do not nest: only depth counts. */
    char wide[4 * 100 + 1] = "";
    for (int i = 0; i < 100; i++)
        strcat(wide, "(a)?");
    ck_assert_msg(sl_ecmare_compile(wide, strlen(wide), &re, why, sizeof why) == SL_OK, "%s", why);
    sl_ecmare_free(re);
    /* Nor do parentheses in a class or escaped. */
    static const char lits[] = "[(((((((((((((((((((((((((((((((((((]\\(\\(";
    re = NULL;
    ck_assert_msg(sl_ecmare_compile(lits, strlen(lits), &re, why, sizeof why) == SL_OK, "%s", why);
    sl_ecmare_free(re);
    free(ok);
    free(deep);
}
END_TEST

static void expect_string(const char *schema_text, const char *s, const char *want_why)
{
    sl_schema_t *schema = compile_or_die(schema_text, __LINE__);
    json_t *doc = json_string(s);
    char why[256] = "";
    sl_err_t rc = sl_schema_validate(schema, doc, why, sizeof why);
    if (want_why) {
        ck_assert_int_eq(rc, SL_ESCHEMA);
        ck_assert_str_eq(why, want_why);
    } else {
        ck_assert_msg(rc == SL_OK, "%s rejected a %zu-byte string: %s", schema_text, strlen(s),
                      why);
    }
    json_decref(doc);
    sl_schema_free(schema);
}

START_TEST(pattern_that_backtracks_without_end_fails_validation)
{
    char evil[64];
    memset(evil, 'a', 40);
    strcpy(evil + 40, "!");
    static const char gave_up[] = "/: could not match the pattern \"^(a+)+$\" within its limits: "
                                  "match limit exceeded";
    expect_string("{'pattern':'^(a+)+$'}", evil, gave_up);
    /* Giving up is not a mismatch: neither "not" nor another branch turns it into a pass. */
    expect_string("{'not':{'pattern':'^(a+)+$'}}", evil, gave_up);
    expect_string("{'anyOf':[{'pattern':'^(a+)+$'},{'type':'string'}]}", evil, gave_up);
    expect_string("{'pattern':'^(a+)+$'}", "aaaa", NULL);
}
END_TEST

START_TEST(pattern_limits_leave_room_for_long_strings)
{
    enum { LEN = 20000 };
    char *s = malloc(LEN + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'a', LEN);
    s[LEN] = '\0';
    /* A repeated group needs stack for each repetition. */
    expect_string("{'pattern':'^(?:a|b)*$'}", s, NULL);
    for (size_t i = 6; i < LEN; i += 7)
        s[i] = ' ';
    expect_string("{'pattern':'^\\\\S+( \\\\S+)*$'}", s, NULL);
    expect_string("{'pattern':'^[^<>]*$'}", s, NULL);
    free(s);
}
END_TEST

/* ---- combinators ------------------------------------------------------------------------ */

START_TEST(any_of_needs_one_matching_branch)
{
    const char *schema = "{'anyOf':[{'type':'string'},{'type':'integer','minimum':0}]}";
    ACCEPTS(schema, "'x'");
    ACCEPTS(schema, "3");
    REJECTS(schema, "-3", "/: value does not match any of the anyOf schemas");
    REJECTS(schema, "null", "/: value does not match any of the anyOf schemas");
}
END_TEST

START_TEST(one_of_needs_exactly_one_matching_branch)
{
    const char *schema = "{'oneOf':[{'type':'integer'},{'minimum':10}]}";
    ACCEPTS(schema, "5");
    ACCEPTS(schema, "10.5");
    REJECTS(schema, "12", "/: value matches more than one of the oneOf schemas");
    REJECTS(schema, "9.5", "/: value does not match any of the oneOf schemas");
}
END_TEST

START_TEST(all_of_reports_the_failing_branch)
{
    const char *schema = "{'allOf':[{'type':'string'},{'maxLength':2}]}";
    ACCEPTS(schema, "'ab'");
    REJECTS(schema, "'abc'", "/: string is longer than 2 characters");
    REJECTS(schema, "1", "/: expected string, got integer");
}
END_TEST

START_TEST(not_inverts_its_schema)
{
    ACCEPTS("{'not':{'type':'null'}}", "0");
    REJECTS("{'not':{'type':'null'}}", "null", "/: value matches the schema in \"not\"");
    ACCEPTS("{'not':{'not':{'type':'null'}}}", "null");
}
END_TEST

START_TEST(boolean_schemas_accept_everything_or_nothing)
{
    ACCEPTS("true", "{'a':[1]}");
    REJECTS("false", "1", "/: no value is allowed here (the schema is false)");
    REJECTS("{'properties':{'legacy':false}}", "{'legacy':1}",
            "/legacy: no value is allowed here (the schema is false)");
    REJECTS("{'items':false}", "[1]", "/0: no value is allowed here (the schema is false)");
    ACCEPTS("{'items':false}", "[]");
}
END_TEST

/* ---- $ref ------------------------------------------------------------------------------- */

START_TEST(ref_resolves_members_of_defs)
{
    const char *schema = "{'$defs':{'pos':{'type':'integer','minimum':1},"
                         "'a/b~c':{'type':'string'}},"
                         "'properties':{'n':{'$ref':'#/$defs/pos'},"
                         "'s':{'$ref':'#/$defs/a~1b~0c'}}}";
    ACCEPTS(schema, "{'n':3,'s':'x'}");
    REJECTS(schema, "{'n':0}", "/n: value is less than the minimum 1");
    REJECTS(schema, "{'s':1}", "/s: expected string, got integer");
    /* A $ref with sibling keywords applies both. */
    REJECTS("{'$defs':{'i':{'type':'integer'}},'$ref':'#/$defs/i','maximum':3}", "4",
            "/: value is greater than the maximum 3");
}
END_TEST

START_TEST(ref_allows_recursive_schemas)
{
    const char *tree = "{'type':'object','required':['name'],"
                       "'properties':{'name':{'type':'string'},"
                       "'children':{'type':'array','items':{'$ref':'#'}}},"
                       "'additionalProperties':false}";
    ACCEPTS(tree, "{'name':'a','children':[{'name':'b','children':[{'name':'c'}]}]}");
    REJECTS(tree, "{'name':'a','children':[{'name':'b','children':[{'nom':'c'}]}]}",
            "/children/0/children/0: missing required property \"name\"");
    const char *list = "{'$defs':{'node':{'type':'object','properties':{"
                       "'value':{'type':'integer'},'next':{'$ref':'#/$defs/node'}}}},"
                       "'$ref':'#/$defs/node'}";
    ACCEPTS(list, "{'value':1,'next':{'value':2,'next':{'value':3}}}");
    REJECTS(list, "{'value':1,'next':{'value':2,'next':{'value':'3'}}}",
            "/next/next/value: expected integer, got string");
}
END_TEST

START_TEST(ref_cycle_that_never_descends_is_rejected)
{
    COMPILE_FAILS("{'$ref':'#'}", "/: $ref cycle that never descends into the document");
    COMPILE_FAILS("{'$defs':{'a':{'$ref':'#/$defs/b'},'b':{'anyOf':[{'$ref':'#/$defs/a'}]}}}",
                  "$ref cycle that never descends into the document");
    COMPILE_FAILS("{'$defs':{'a':{'not':{'$ref':'#/$defs/a'}}}}",
                  "/$defs/a: $ref cycle that never descends into the document");
}
END_TEST

START_TEST(ref_to_unknown_or_remote_target_is_rejected)
{
    COMPILE_FAILS("{'$ref':'#/$defs/missing'}", "/$ref: unresolvable $ref");
    COMPILE_FAILS("{'$ref':'other.json#/$defs/x'}", "/$ref: unsupported $ref");
    COMPILE_FAILS("{'$defs':{'x':{}},'$ref':'#/$defs/x/properties/y'}", "/$ref: unsupported $ref");
    COMPILE_FAILS("{'$ref':'#/definitions/x'}", "/$ref: unsupported $ref");
    COMPILE_FAILS("{'$ref':5}", "/$ref: must be a string");
}
END_TEST

/* ---- compile errors --------------------------------------------------------------------- */

START_TEST(unsupported_keyword_is_rejected_by_name)
{
    COMPILE_FAILS("{'type':'array','uniqueItems':true}", "/: unsupported keyword \"uniqueItems\"");
    COMPILE_FAILS("{'properties':{'x':{'patternProperties':{}}}}",
                  "/properties/x: unsupported keyword \"patternProperties\"");
    COMPILE_FAILS("{'properties':{'x':{'maxlength':3}}}",
                  "/properties/x: unsupported keyword \"maxlength\"");
    COMPILE_FAILS("{'items':{'$dynamicRef':'#x'}}", "/items: unsupported keyword \"$dynamicRef\"");
    COMPILE_FAILS("{'definitions':{}}", "/: unsupported keyword \"definitions\"");
}
END_TEST

START_TEST(malformed_keyword_values_are_rejected)
{
    COMPILE_FAILS("5", "/: a schema must be an object or a boolean");
    COMPILE_FAILS("{'type':'strin'}", "/type: unknown type");
    COMPILE_FAILS("{'type':[]}", "/type: must be a type name");
    COMPILE_FAILS("{'type':['string','string']}", "/type: type names must be unique");
    COMPILE_FAILS("{'properties':[]}", "/properties: must be an object of schemas");
    COMPILE_FAILS("{'properties':{'a':3}}", "/properties/a: a schema must be an object");
    COMPILE_FAILS("{'required':'a'}", "/required: must be an array of property names");
    COMPILE_FAILS("{'required':['a','a']}", "/required: property names must be unique");
    COMPILE_FAILS("{'additionalProperties':'no'}", "/additionalProperties: a schema must be");
    COMPILE_FAILS("{'items':[{},{}]}", "/items: must be one schema");
    COMPILE_FAILS("{'enum':'a'}", "/enum: must be an array");
    COMPILE_FAILS("{'minimum':'1'}", "/minimum: must be a number");
    COMPILE_FAILS("{'exclusiveMinimum':true}", "/exclusiveMinimum: must be a number");
    COMPILE_FAILS("{'minLength':-1}", "/minLength: must be a non-negative integer");
    COMPILE_FAILS("{'maxItems':1.5}", "/maxItems: must be a non-negative integer");
    COMPILE_FAILS("{'maxProperties':'3'}", "/maxProperties: must be a non-negative integer");
    COMPILE_FAILS("{'pattern':3}", "/pattern: must be a string");
    COMPILE_FAILS("{'anyOf':[]}", "/anyOf: must be a non-empty array of schemas");
    COMPILE_FAILS("{'oneOf':{}}", "/oneOf: must be a non-empty array of schemas");
    COMPILE_FAILS("{'allOf':[{},{'type':1}]}", "/allOf/1/type: must be a type name");
    COMPILE_FAILS("{'not':[]}", "/not: a schema must be an object or a boolean");
    COMPILE_FAILS("{'$defs':[]}", "/$defs: must be an object of schemas");
    COMPILE_FAILS("{'title':3}", "/title: must be a string");
    COMPILE_FAILS("{'deprecated':'yes'}", "/deprecated: must be a boolean");
    COMPILE_FAILS("{'properties':{'a':{'$id':'x'}}}", "/properties/a/$id: $id is only supported");
    /* Members of $defs are checked even when nothing refers to them. */
    COMPILE_FAILS("{'$defs':{'unused':{'minItem':1}}}",
                  "/$defs/unused: unsupported keyword \"minItem\"");
    COMPILE_FAILS("{'properties':{'x':{'$defs':{'y':{'bogus':1}}}}}",
                  "/properties/x/$defs/y: unsupported keyword \"bogus\"");
    ACCEPTS("{'minLength':2.0}", "'ab'");
}
END_TEST

START_TEST(annotations_are_accepted_and_ignored)
{
    const char *schema = "{'$schema':'https://json-schema.org/draft/2020-12/schema','$id':'urn:x',"
                         "'$comment':'c','title':'t','description':'d','examples':[1],'default':{},"
                         "'properties':{'email':{'type':'string','format':'email','readOnly':true,"
                         "'writeOnly':false,'deprecated':true,'default':'x'}}}";
    ACCEPTS(schema, "{'email':'not an email: format is not checked'}");
    REJECTS(schema, "{'email':1}", "/email: expected string, got integer");
}
END_TEST

START_TEST(failed_compile_leaves_out_null_and_err_optional)
{
    json_t *js = J("{'bogus':1}");
    sl_schema_t *schema = (sl_schema_t *)&js;
    ck_assert_int_eq(sl_schema_compile(js, &schema, NULL, 0), SL_ESCHEMA);
    ck_assert_ptr_null(schema);
    char tiny[8];
    ck_assert_int_eq(sl_schema_compile(js, &schema, tiny, sizeof tiny), SL_ESCHEMA);
    ck_assert_str_eq(tiny, "/: unsu");
    ck_assert_int_eq(sl_schema_compile(NULL, &schema, NULL, 0), SL_EINVAL);
    json_decref(js);
    sl_schema_free(NULL);
}
END_TEST

/* ---- error pointers --------------------------------------------------------------------- */

START_TEST(pointer_names_the_nested_location)
{
    const char *schema = "{'properties':{'request':{'properties':{'messages':{'items':{"
                         "'properties':{'role':{'enum':['system','user','assistant']}}}}}}}}";
    REJECTS(schema, "{'request':{'messages':[{'role':'user'},{'role':'robot'}]}}",
            "/request/messages/1/role: value is not one of the allowed values");
    REJECTS(schema, "{'request':{'messages':[{'role':'pirate'}]}}",
            "/request/messages/0/role: value is not one of the allowed values");
}
END_TEST

START_TEST(pointer_escapes_tilde_slash_and_control_characters)
{
    const char *schema = "{'additionalProperties':{'type':'integer'}}";
    REJECTS(schema, "{'a/b':'x'}", "/a~1b: expected integer, got string");
    REJECTS(schema, "{'~t':'x'}", "/~0t: expected integer, got string");
    REJECTS(schema, "{'x~/y':'x'}", "/x~0~1y: expected integer, got string");
    REJECTS(schema, "{'line\\nbreak':'x'}", "/line\\u000abreak: expected integer, got string");
    /* Quoted names escape quotes and backslashes. */
    REJECTS("{'required':['a\\u0022b\\\\c']}", "{}",
            "/: missing required property \"a\\\"b\\\\c\"");
}
END_TEST

START_TEST(first_violation_in_document_order_is_reported)
{
    const char *schema = "{'additionalProperties':{'type':'integer'}}";
    REJECTS(schema, "{'ok':1,'first':'x','second':'y'}", "/first: expected integer, got string");
}
END_TEST

/* ---- depth ------------------------------------------------------------------------------ */

static json_t *nested_arrays(int levels)
{
    json_t *doc = json_array();
    for (int i = 0; i < levels; i++)
        doc = json_pack("[o]", doc);
    return doc;
}

START_TEST(deep_nesting_is_bounded)
{
    sl_schema_t *schema = compile_or_die("{'type':'array','items':{'$ref':'#'}}", __LINE__);
    char why[512];
    /* The innermost array sits at depth 64: allowed. */
    json_t *ok = nested_arrays(SL_SCHEMA_MAX_DEPTH);
    ck_assert_int_eq(sl_schema_validate(schema, ok, why, sizeof why), SL_OK);
    json_decref(ok);

    json_t *deep = nested_arrays(SL_SCHEMA_MAX_DEPTH + 1);
    ck_assert_int_eq(sl_schema_validate(schema, deep, why, sizeof why), SL_ESCHEMA);
    ck_assert_msg(strstr(why, "/0/0/0/") == why, "why: %s", why);
    ck_assert_msg(strstr(why, ": document nested too deeply") != NULL, "why: %s", why);
    sl_schema_free(schema);

    /* A "not" must not turn the depth failure into a pass. */
    schema = compile_or_die("{'$defs':{'a':{'type':'array','items':{'$ref':'#/$defs/a'}}},"
                            "'not':{'$ref':'#/$defs/a'}}",
                            __LINE__);
    ck_assert_int_eq(sl_schema_validate(schema, deep, why, sizeof why), SL_ESCHEMA);
    ck_assert_msg(strstr(why, ": document nested too deeply") != NULL, "why: %s", why);
    sl_schema_free(schema);

    /* Nesting the schema does not descend into is not checked at all. */
    schema = compile_or_die("{'type':'array'}", __LINE__);
    ck_assert_int_eq(sl_schema_validate(schema, deep, why, sizeof why), SL_OK);
    sl_schema_free(schema);
    json_decref(deep);
}
END_TEST

/* A schema whose $refs fan out: a0 is anyOf [a1, a1], a1 anyOf [a2, a2], ..., so a value that
 * fails at the bottom is tried 2^levels times. With descend, each level also goes one array
 * deeper. The caller frees the result. */
static sl_schema_t *fanning_schema(int levels, int descend)
{
    json_t *defs = json_object();
    for (int i = 0; i < levels; i++) {
        char name[16], ref[32];
        snprintf(name, sizeof name, "a%d", i);
        snprintf(ref, sizeof ref, "#/$defs/a%d", i + 1);
        json_t *branch = descend
                             ? json_pack("{s:s, s:{s:s}}", "type", "array", "items", "$ref", ref)
                             : json_pack("{s:s}", "$ref", ref);
        json_object_set_new(defs, name, json_pack("{s:[O,o]}", "anyOf", branch, branch));
    }
    char last[16];
    snprintf(last, sizeof last, "a%d", levels);
    json_object_set_new(defs, last, json_pack("{s:s}", "type", "string"));
    json_t *root = json_pack("{s:o, s:s}", "$defs", defs, "$ref", "#/$defs/a0");
    sl_schema_t *schema = NULL;
    char err[256];
    ck_assert_msg(sl_schema_compile(root, &schema, err, sizeof err) == SL_OK, "%s", err);
    json_decref(root);
    return schema;
}

/* A hostile schema used to make one validation run for 2^40 steps (it did not finish); it now
 * gives up at its step budget, at once, and nothing turns that into a pass. */
START_TEST(fanning_refs_are_bounded_by_the_step_budget)
{
    char why[512];
    sl_schema_t *schema = fanning_schema(40, 0 /*same value*/);
    json_t *doc = json_integer(1);
    double t0 = sl_mono_ms();
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_ESCHEMA);
    ck_assert_msg(sl_mono_ms() - t0 < 1000, "took %.0f ms", sl_mono_ms() - t0);
    ck_assert_msg(strstr(why, "/: validation gave up") == why, "why: %s", why);
    json_t *str = json_string("ok");
    ck_assert_int_eq(sl_schema_validate(schema, str, why, sizeof why), SL_OK);
    json_decref(str);
    json_decref(doc);
    sl_schema_free(schema);

    /* Fanning out while descending: 40 arrays deep, within SL_SCHEMA_MAX_DEPTH. */
    schema = fanning_schema(40, 1 /*one array deeper each level*/);
    doc = nested_arrays(40);
    t0 = sl_mono_ms();
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_ESCHEMA);
    ck_assert_msg(sl_mono_ms() - t0 < 1000, "took %.0f ms", sl_mono_ms() - t0);
    ck_assert_msg(strstr(why, "validation gave up") != NULL, "why: %s", why);
    json_decref(doc);
    sl_schema_free(schema);

    /* A few levels of fan-out are within the budget and answer as before. */
    schema = fanning_schema(3, 0);
    doc = json_integer(1);
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_ESCHEMA);
    ck_assert_msg(strstr(why, "does not match any of the anyOf schemas") != NULL, "why: %s", why);
    json_decref(doc);
    sl_schema_free(schema);
}
END_TEST

/* ---- the realistic chat request --------------------------------------------------------- */

static char *fixture_path(const char *name)
{
    /* __FILE__ is tests/test_jsonschema.c as the Makefile compiles it from the repository root. */
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    int dir_len = slash ? (int)(slash - file) : 1;
    char *path = NULL;
    ck_assert_int_ge(
        asprintf(&path, "%.*s/fixtures/jsonschema/%s", dir_len, slash ? file : ".", name), 0);
    return path;
}

static sl_schema_t *load_chat_schema(void)
{
    char *path = fixture_path("chat_request.schema.json");
    sl_schema_t *schema = NULL;
    char err[256];
    sl_err_t rc = sl_schema_load_file(path, &schema, err, sizeof err);
    ck_assert_msg(rc == SL_OK, "load %s: %s", path, err);
    free(path);
    return schema;
}

/* About 2 KB: a system prompt, a short exchange and a longer user turn. */
static json_t *chat_request(void)
{
    static const char para[] = "Summarise the attached incident report for the on-call team. "
                               "Keep it short, list the customer impact first, then the "
                               "timeline, then follow-up actions with owners. ";
    char long_text[2048] = "";
    for (int i = 0; i < 9; i++)
        strcat(long_text, para);
    return json_pack("{s:s, s:s, s:s, s:i, s:f, s:i, s:[{s:s,s:s},{s:s,s:s},{s:s,s:s},"
                     "{s:s,s:s,s:s}], s:{s:s,s:i,s:b}, s:[s,s]}",
                     "job_id", "job_2024_000123", "tenant", "acme", "model", "large", "max_tokens",
                     4096, "temperature", 0.2, "priority", 3, "messages", "role", "system",
                     "content", "You are a careful assistant for an operations team.", "role",
                     "user", "content", "Hello! Can you help me with a report?", "role",
                     "assistant", "content", "Of course. Please paste the report.", "role", "user",
                     "content", long_text, "name", "oncall_lead", "metadata", "source", "pager",
                     "attempt", 1, "urgent", 1, "stop", "\n\nEND", "###");
}

START_TEST(chat_request_accepts_a_realistic_document)
{
    sl_schema_t *schema = load_chat_schema();
    json_t *doc = chat_request();
    char *text = json_dumps(doc, JSON_COMPACT);
    ck_assert_int_gt((int)strlen(text), 1900);
    free(text);
    char why[256] = "";
    ck_assert_msg(sl_schema_validate(schema, doc, why, sizeof why) == SL_OK, "why: %s", why);
    json_decref(doc);
    sl_schema_free(schema);
}
END_TEST

static void expect_chat_rejection(sl_schema_t *schema, json_t *doc, const char *want)
{
    char why[256] = "";
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_ESCHEMA);
    ck_assert_str_eq(why, want);
    json_decref(doc);
}

START_TEST(chat_request_rejects_each_kind_of_mistake)
{
    sl_schema_t *schema = load_chat_schema();
    json_t *doc;

    doc = chat_request();
    json_object_set_new(json_array_get(json_object_get(doc, "messages"), 2), "role",
                        json_string("robot"));
    expect_chat_rejection(schema, doc, "/messages/2/role: value is not one of the allowed values");

    doc = chat_request();
    json_object_set_new(doc, "max_tokens", json_integer(0));
    expect_chat_rejection(schema, doc, "/max_tokens: value is less than the minimum 1");

    doc = chat_request();
    json_object_set_new(doc, "max_tokens", json_integer(100001));
    expect_chat_rejection(schema, doc, "/max_tokens: value is greater than the maximum 100000");

    doc = chat_request();
    json_object_set_new(doc, "max_tokens", json_real(10.5));
    expect_chat_rejection(schema, doc, "/max_tokens: expected integer, got number");

    doc = chat_request();
    json_object_del(doc, "tenant");
    expect_chat_rejection(schema, doc, "/: missing required property \"tenant\"");

    doc = chat_request();
    json_object_set_new(doc, "api_key", json_string("sk-oops"));
    expect_chat_rejection(schema, doc, "/api_key: property is not allowed");

    doc = chat_request();
    json_object_set_new(json_array_get(json_object_get(doc, "messages"), 0), "tool_calls",
                        json_array());
    expect_chat_rejection(schema, doc, "/messages/0/tool_calls: property is not allowed");

    doc = chat_request();
    json_object_del(json_array_get(json_object_get(doc, "messages"), 1), "content");
    expect_chat_rejection(schema, doc, "/messages/1: missing required property \"content\"");

    doc = chat_request();
    json_array_clear(json_object_get(doc, "messages"));
    expect_chat_rejection(schema, doc, "/messages: array has fewer than 1 items");

    doc = chat_request();
    json_object_set_new(doc, "job_id", json_string("short"));
    expect_chat_rejection(schema, doc,
                          "/job_id: string does not match the pattern \"^[A-Za-z0-9_-]{8,64}$\"");

    doc = chat_request();
    json_object_set_new(json_object_get(doc, "metadata"), "nested", json_object());
    expect_chat_rejection(schema, doc,
                          "/metadata/nested: expected string, number, boolean or null, got object");

    doc = chat_request();
    json_object_set_new(doc, "stop", json_pack("[s,s,s,s,s]", "a", "b", "c", "d", "e"));
    expect_chat_rejection(schema, doc, "/stop: value does not match any of the anyOf schemas");

    doc = chat_request();
    json_object_set_new(doc, "deadline_ms", json_integer(0));
    expect_chat_rejection(schema, doc,
                          "/deadline_ms: value is not greater than the exclusive minimum 0");

    sl_schema_free(schema);
}
END_TEST

/* ---- files, ownership, threads ---------------------------------------------------------- */

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/test_jsonschema_XXXXXX");
    ck_assert_ptr_nonnull(path);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    return path;
}

START_TEST(load_file_reports_io_parse_and_schema_errors)
{
    sl_schema_t *schema = (sl_schema_t *)&schema;
    char err[256];

    ck_assert_int_eq(sl_schema_load_file("/nonexistent/x.json", &schema, err, sizeof err), SL_EIO);
    ck_assert_ptr_null(schema);
    ck_assert_msg(strncmp(err, "/nonexistent/x.json: ", 21) == 0, "err: %s", err);

    char *bad_json = write_temp("{\"type\": ");
    ck_assert_int_eq(sl_schema_load_file(bad_json, &schema, err, sizeof err), SL_EPARSE);
    ck_assert_ptr_null(schema);

    char *dup_key = write_temp("{\"type\": \"string\", \"type\": \"integer\"}");
    ck_assert_int_eq(sl_schema_load_file(dup_key, &schema, err, sizeof err), SL_EPARSE);

    char *bad_kw = write_temp("{\"properties\": {\"a\": {\"typo\": 1}}}");
    ck_assert_int_eq(sl_schema_load_file(bad_kw, &schema, err, sizeof err), SL_ESCHEMA);
    char want[256];
    snprintf(want, sizeof want, "%s: /properties/a: unsupported keyword \"typo\"", bad_kw);
    ck_assert_str_eq(err, want);

    char *good = write_temp("{\"type\": \"string\"}");
    ck_assert_int_eq(sl_schema_load_file(good, &schema, err, sizeof err), SL_OK);
    ck_assert_ptr_nonnull(schema);
    ck_assert_str_eq(err, "");
    sl_schema_free(schema);

    char *paths[] = {bad_json, dup_key, bad_kw, good};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        unlink(paths[i]);
        free(paths[i]);
    }
}
END_TEST

START_TEST(compiled_schema_outlives_its_json)
{
    json_t *js = J("{'enum':['a',{'b':1}],'const':'a','required':['x'],"
                   "'properties':{'x':{'pattern':'^a$'}}}");
    sl_schema_t *schema = NULL;
    ck_assert_int_eq(sl_schema_compile(js, &schema, NULL, 0), SL_OK);
    json_decref(js);
    json_t *doc = J("'a'");
    ck_assert_int_eq(sl_schema_validate(schema, doc, NULL, 0), SL_OK);
    json_decref(doc);
    doc = J("{'x':'b'}");
    ck_assert_int_eq(sl_schema_validate(schema, doc, NULL, 0), SL_ESCHEMA);
    json_decref(doc);
    sl_schema_free(schema);
}
END_TEST

START_TEST(validate_never_modifies_the_document)
{
    sl_schema_t *schema = load_chat_schema();
    json_t *doc = chat_request();
    json_object_set_new(doc, "extra", json_true());
    char *before = json_dumps(doc, JSON_COMPACT);
    size_t refcount = doc->refcount;
    char why[128];
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_ESCHEMA);
    char *after = json_dumps(doc, JSON_COMPACT);
    ck_assert_str_eq(before, after);
    ck_assert_uint_eq(doc->refcount, refcount);
    free(before);
    free(after);
    json_decref(doc);
    sl_schema_free(schema);
}
END_TEST

START_TEST(why_is_optional_and_truncated_safely)
{
    sl_schema_t *schema = compile_or_die("{'required':['a_rather_long_property_name']}", __LINE__);
    json_t *doc = J("{}");
    char why[10];
    memset(why, 'x', sizeof why);
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, sizeof why), SL_ESCHEMA);
    ck_assert_str_eq(why, "/: missin");
    ck_assert_int_eq(sl_schema_validate(schema, doc, NULL, 0), SL_ESCHEMA);
    ck_assert_int_eq(sl_schema_validate(schema, doc, why, 0), SL_ESCHEMA);
    ck_assert_int_eq(sl_schema_validate(NULL, doc, why, sizeof why), SL_EINVAL);
    json_decref(doc);
    sl_schema_free(schema);
}
END_TEST

typedef struct {
    const sl_schema_t *schema;
    int mismatches;
} worker_t;

static void *validate_many(void *arg)
{
    worker_t *w = arg;
    json_t *good = chat_request();
    json_t *bad = chat_request();
    json_object_set_new(bad, "job_id", json_string("bad id!"));
    for (int i = 0; i < 2000; i++) {
        char why[128];
        if (sl_schema_validate(w->schema, good, why, sizeof why) != SL_OK)
            w->mismatches++;
        if (sl_schema_validate(w->schema, bad, why, sizeof why) != SL_ESCHEMA ||
            strncmp(why, "/job_id: string does not match", 30) != 0)
            w->mismatches++;
    }
    json_decref(good);
    json_decref(bad);
    return NULL;
}

START_TEST(concurrent_validations_of_one_schema_agree)
{
    sl_schema_t *schema = load_chat_schema();
    pthread_t threads[4];
    worker_t workers[4];
    for (int i = 0; i < 4; i++) {
        workers[i] = (worker_t){schema, 0};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, validate_many, &workers[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_int_eq(workers[i].mismatches, 0);
    }
    sl_schema_free(schema);
}
END_TEST

static Suite *jsonschema_suite(void)
{
    Suite *s = suite_create("jsonschema");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, type_accepts_its_type_and_rejects_others);
    tcase_add_test(tc, type_array_accepts_any_listed_type);
    tcase_add_test(tc, integer_accepts_integral_reals_and_rejects_fractions);
    tcase_add_test(tc, number_accepts_integers_and_reals);
    tcase_add_test(tc, properties_check_only_members_that_are_present);
    tcase_add_test(tc, required_reports_the_missing_property);
    tcase_add_test(tc, additional_properties_false_rejects_unlisted_members);
    tcase_add_test(tc, additional_properties_schema_checks_unlisted_members);
    tcase_add_test(tc, min_and_max_properties_bound_the_member_count);
    tcase_add_test(tc, items_checks_every_element_and_reports_its_index);
    tcase_add_test(tc, min_and_max_items_bound_the_length);
    tcase_add_test(tc, enum_accepts_only_listed_values);
    tcase_add_test(tc, const_requires_an_equal_value);
    tcase_add_test(tc, minimum_and_maximum_are_inclusive);
    tcase_add_test(tc, exclusive_bounds_exclude_the_limit);
    tcase_add_test(tc, bounds_compare_large_integers_exactly);
    tcase_add_test(tc, string_length_counts_code_points_not_bytes);
    tcase_add_test(tc, pattern_matches_anywhere_unless_anchored);
    tcase_add_test(tc, pattern_translates_ecma_escapes_and_classes);
    tcase_add_test(tc, pattern_supports_lookaround_backreferences_and_escapes);
    tcase_add_test(tc, pattern_keeps_ecma_262_meaning_where_pcre2_differs);
    tcase_add_test(tc, pattern_that_is_not_ecma_262_is_rejected_at_compile);
    tcase_add_test(tc, pattern_length_is_bounded);
    tcase_add_test(tc, pattern_nesting_is_bounded);
    tcase_add_test(tc, pattern_that_backtracks_without_end_fails_validation);
    tcase_add_test(tc, pattern_limits_leave_room_for_long_strings);
    tcase_add_test(tc, any_of_needs_one_matching_branch);
    tcase_add_test(tc, one_of_needs_exactly_one_matching_branch);
    tcase_add_test(tc, all_of_reports_the_failing_branch);
    tcase_add_test(tc, not_inverts_its_schema);
    tcase_add_test(tc, boolean_schemas_accept_everything_or_nothing);
    tcase_add_test(tc, ref_resolves_members_of_defs);
    tcase_add_test(tc, ref_allows_recursive_schemas);
    tcase_add_test(tc, ref_cycle_that_never_descends_is_rejected);
    tcase_add_test(tc, ref_to_unknown_or_remote_target_is_rejected);
    tcase_add_test(tc, unsupported_keyword_is_rejected_by_name);
    tcase_add_test(tc, malformed_keyword_values_are_rejected);
    tcase_add_test(tc, annotations_are_accepted_and_ignored);
    tcase_add_test(tc, failed_compile_leaves_out_null_and_err_optional);
    tcase_add_test(tc, pointer_names_the_nested_location);
    tcase_add_test(tc, pointer_escapes_tilde_slash_and_control_characters);
    tcase_add_test(tc, first_violation_in_document_order_is_reported);
    tcase_add_test(tc, deep_nesting_is_bounded);
    tcase_add_test(tc, fanning_refs_are_bounded_by_the_step_budget);
    tcase_add_test(tc, chat_request_accepts_a_realistic_document);
    tcase_add_test(tc, chat_request_rejects_each_kind_of_mistake);
    tcase_add_test(tc, load_file_reports_io_parse_and_schema_errors);
    tcase_add_test(tc, compiled_schema_outlives_its_json);
    tcase_add_test(tc, validate_never_modifies_the_document);
    tcase_add_test(tc, why_is_optional_and_truncated_safely);
    tcase_add_test(tc, concurrent_validations_of_one_schema_agree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(jsonschema_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

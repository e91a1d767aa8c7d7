/* batch_internal.h - what the batch modules share: a set of lines read from an input, an
 * uploaded file, a batch, and a deployment's batch state. Private to batch.c (state and
 * endpoints), batch_input.c (reading inputs into line sets) and batch_wire.c (spelling batch
 * objects and results); the rest of the simulator uses batch.h.
 *
 * The idea to hold first: a line costs a few dozen bytes. Its text is not kept: reading it
 * yields its custom id, its prompt estimate, its completion length (drawn from a hash of its
 * body, as for an online request), and the message of the 400 the API would answer when its
 * body is invalid; a result line is rebuilt from these when results are read.
 */
#ifndef SL_SIM_BATCH_INTERNAL_H
#define SL_SIM_BATCH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "buf.h"
#include "idem.h"
#include "sim_internal.h"

#define SL_SIM_BATCH_OPENAI_MAX_LINES 50000
#define SL_SIM_BATCH_OPENAI_MAX_FILE_BYTES (200u * 1024u * 1024u)
#define SL_SIM_BATCH_ANTHROPIC_MAX_REQUESTS 100000
#define SL_SIM_BATCH_ANTHROPIC_MAX_BYTES (256u * 1024u * 1024u)
#define SL_SIM_BATCH_GEMINI_MAX_BYTES (20u * 1024u * 1024u)
#define SL_SIM_BATCH_CUSTOM_ID_MAX 512 /* characters of a custom id (OpenAI allows 512) */
#define SL_SIM_BATCH_PROBLEMS_MAX 10   /* validation problems reported of one file */
#define SL_SIM_BATCH_RAN_IDS_MAX 1000000
#define SL_SIM_BATCH_MODEL_MAX 128
#define SL_SIM_BATCH_NO_TEXT UINT32_MAX
#define SL_SIM_BATCH_WINDOW_S 86400 /* completion_window 24h */

/* One line (OpenAI, Azure), request (Anthropic) or inline request (Gemini) of a batch. */
typedef struct {
    uint32_t id_off;    /* the custom id (Gemini: metadata.key, "" if none), JSON-escaped */
    uint32_t meta_off;  /* Gemini: the request's metadata as compact JSON; NO_TEXT if none */
    uint32_t error_off; /* the API's 400 message for an invalid body, escaped; NO_TEXT if valid */
    bool hit_max_tokens;
    int64_t prompt_tokens;
    int64_t completion_tokens;
} sl_sim_batch_line_t;

/* Why an input file cannot run (OpenAI and Azure validation). */
typedef struct {
    char code[40];
    char message[200]; /* escaped */
    int64_t line;      /* 1-based; 0 = the file as a whole */
} sl_sim_batch_problem_t;

/* The lines read from one input; shared by a file and the batches made from it. */
typedef struct {
    int refs;
    size_t n;
    sl_sim_batch_line_t *lines;
    size_t lines_cap;
    sl_buf_t text;  /* the strings the lines point into, each NUL-terminated */
    int64_t tokens; /* the sum of the prompt estimates */
    size_t bytes;   /* the size of the input */
    char model[SL_SIM_BATCH_MODEL_MAX * 6 + 1]; /* OpenAI/Azure: the lines' model, escaped */
    char url[40];                               /* OpenAI/Azure: the lines' url */
    sl_sim_batch_problem_t problems[SL_SIM_BATCH_PROBLEMS_MAX];
    size_t n_problems; /* reported ones (at most SL_SIM_BATCH_PROBLEMS_MAX) */
} sl_sim_batch_set_t;

/* An uploaded file (OpenAI, Azure): its lines are kept, its bytes are not. */
typedef struct {
    char id[40];
    char filename[256 * 6 + 1]; /* escaped */
    int64_t created_s;
    size_t bytes;
    sl_sim_batch_set_t *set;
} sl_sim_batch_file_t;

/* What becomes of a line when its batch runs to its end. */
typedef enum {
    SL_SIM_LINE_OK = 0,
    SL_SIM_LINE_SERVER_ERROR, /* line_error_share: a 500 */
    SL_SIM_LINE_INVALID,      /* the body is one the API refuses: a 400 */
    SL_SIM_LINE_EXPIRED,      /* expire_share */
} sl_sim_line_fate_t;

typedef enum {
    SL_SIM_BATCH_RUNNING = 0,
    SL_SIM_BATCH_FAILED, /* OpenAI/Azure: refused at validation; nothing ran */
    SL_SIM_BATCH_COMPLETED,
    SL_SIM_BATCH_EXPIRED, /* ended with some lines expired */
    SL_SIM_BATCH_CANCELLED,
} sl_sim_batch_status_t;

typedef struct {
    int refs; /* the state's list holds one; a rendering outside the lock another */
    uint64_t serial;
    sl_sim_api_t api;
    char id[48]; /* "batch_…", "msgbatch_…", Gemini's without "batches/" */
    char input_file_id[40];
    char output_file_id[40]; /* "" = none */
    char error_file_id[40];  /* "" = none */
    char endpoint[40];
    char *label; /* OpenAI/Azure: the metadata object as compact JSON; Gemini: the display name,
                  * escaped; NULL = none */
    char model[SL_SIM_BATCH_MODEL_MAX + 1]; /* Gemini: from the path */
    sl_sim_batch_set_t *set;
    uint8_t *fate;      /* per line, a sl_sim_line_fate_t; NULL when the batch failed */
    int64_t created_ms; /* simulator time */
    int64_t due_ms;     /* when it ends by itself */
    int64_t cancel_ms;  /* when a cancel was asked; -1 = never */
    int64_t ended_ms;   /* -1 while running */
    sl_sim_batch_status_t status;
    int64_t tokens; /* enqueued while running; 0 for a failed batch */
    int64_t n_ok, n_errored, n_expired, n_cancelled; /* once ended */
    sl_sim_batch_problem_t failure;                  /* why it failed, when it failed */
    const sl_sim_batch_problem_t *problems; /* the problems to report (failure or the set's) */
    size_t n_problems;
} sl_sim_batch_t;

struct sl_sim_batch_state {
    const sl_sim_batch_config_t *cfg;
    uint64_t rng;          /* the line draws (splitmix64 state) */
    sl_sim_batch_t **list; /* oldest first; at most cfg->max_batches */
    size_t n_batches;
    sl_sim_batch_file_t **files; /* oldest first; at most cfg->max_batches */
    size_t n_files;
    int64_t *creates; /* times of the last creates_per_minute creations, a ring */
    size_t creates_next, creates_len;
    sl_sim_idem_t *ran_ids; /* custom ids that succeeded; made at the first end */
    uint64_t serial;
};

/* ---- batch_input.c: reading inputs (outside the lock) ---- */

/* Frees a set whose last reference is dropped; NULL is a no-op. */
void sl_sim_batch_set_unref(sl_sim_batch_set_t *set);

/* Reads an OpenAI/Azure JSONL input file of len bytes into *out: lines that break the file's
 * rules become problems of the set (the batch made from it fails), bodies the API would refuse
 * become invalid lines. Returns SL_ENOMEM or SL_OK. */
sl_err_t sl_sim_batch_read_jsonl(const sl_sim_dep_config_t *dc, const char *data, size_t len,
                                 sl_sim_batch_set_t **out);

/* Reads the body of an Anthropic Message Batches create or of a Gemini batchGenerateContent into
 * *out. Returns SL_OK, SL_ENOMEM, or SL_EINVAL with err holding the 400 to answer (an API-shaped
 * message: the request as a whole is refused). */
sl_err_t sl_sim_batch_read_anthropic(const sl_sim_dep_config_t *dc, const char *body, size_t len,
                                     sl_sim_batch_set_t **out, sl_sim_error_t *err);
sl_err_t sl_sim_batch_read_gemini(const sl_sim_dep_config_t *dc, const char *body, size_t len,
                                  sl_sim_batch_set_t **out, char *display_name,
                                  size_t display_name_cap, sl_sim_error_t *err);

/* The string at off of set's text. */
static inline const char *sl_sim_batch_text(const sl_sim_batch_set_t *set, uint32_t off)
{
    return set->text.ptr + off;
}

/* ---- batch_wire.c: spelling (ended batches outside the lock, others under it) ---- */

/* What a rendering needs besides the batch. */
typedef struct {
    const sl_sim_t *sim;
    const sl_sim_dep_config_t *dc;
    int64_t now_ms;
    const char *host; /* for Anthropic's results_url */
} sl_sim_batch_view_t;

/* Appends the batch object (OpenAI/Azure batch, Anthropic message_batch, Gemini operation with
 * its inline responses once done) to out. SL_ENOMEM or SL_ETOOBIG leave out partly written. */
sl_err_t sl_sim_batch_wire_object(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b,
                                  sl_buf_t *out);

/* Appends the JSONL results of an ended batch: OpenAI/Azure the output file (errors = false)
 * or the error file (errors = true), Anthropic its results. */
sl_err_t sl_sim_batch_wire_results(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b,
                                   bool errors, sl_buf_t *out);

/* Appends an OpenAI file object: id, size, creation time (Unix seconds), filename (escaped)
 * and purpose ("batch" for inputs, "batch_output" for results). */
sl_err_t sl_sim_batch_wire_file(const char *id, size_t bytes, int64_t created_s,
                                const char *filename, const char *purpose, sl_buf_t *out);

/* The Unix seconds / milliseconds of a simulator time. */
int64_t sl_sim_batch_unix_s(const sl_sim_t *sim, int64_t sim_ms);

#endif

/* batch.h - the providers' batch APIs in the simulator: OpenAI and Azure files and batches,
 * Anthropic Message Batches and Gemini batchGenerateContent, each under its deployment's URL
 * prefix and in the formats of docs/provider-batch.md.
 *
 * The idea to hold first: a batch's fate is drawn whole when it is created and its state is a
 * function of the clock. Creation reads every line, estimates its prompt, draws whether it will
 * succeed, fail or expire (from the deployment's seeded batch sequence) and enqueues its tokens;
 * after that nothing is decided, a batch only moves from running to ended when a request at or
 * after its due time settles it (sl_sim_batch_settle), which is also when its tokens are released
 * and its lines counted. Batch lines never touch the online limits: the batch quota is separate.
 *
 * All of a deployment's batch state is guarded by the simulator's lock. A batch that has ended
 * never changes again, so its (large) results are rendered outside the lock while a reference
 * keeps it alive.
 */
#ifndef SL_SIM_BATCH_H
#define SL_SIM_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sim_internal.h"

/* Creates the batch state of a deployment whose batch draws start from seed. Returns SL_ENOMEM
 * or SL_OK with *out set (freed with sl_sim_batch_state_free). Nothing large is allocated until
 * the first batch. */
sl_err_t sl_sim_batch_state_new(const sl_sim_dep_config_t *dc, uint64_t seed,
                                sl_sim_batch_state_t **out);

/* Frees st with every batch and file it holds; NULL is a no-op. */
void sl_sim_batch_state_free(sl_sim_batch_state_t *st);

/* The largest request body accepted on rest (the path after "/<name>") of a deployment of api:
 * the batch upload and create limits for batch paths, 0 for any other path. */
size_t sl_sim_batch_body_limit(sl_sim_api_t api, const char *rest);

/* Ends every batch of dep that is due at now_ms (or whose cancel was asked before): releases its
 * enqueued tokens and counts its lines. Caller holds the lock. */
void sl_sim_batch_settle(sl_sim_t *sim, sl_sim_deployment_t *dep, int64_t now_ms);

/* Answers req if rest (the path after "/<name>") is one of the batch endpoints of dep's API:
 * *handled is set and resp filled (status, headers, body). Otherwise *handled is false and resp
 * is untouched. Returns SL_ENOMEM (the state is as it was, nothing counted) or SL_OK. Takes the
 * lock. */
sl_err_t sl_sim_batch_handle(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                             const char *rest, int64_t now_ms, sl_sim_response_t *resp,
                             bool *handled);

#endif

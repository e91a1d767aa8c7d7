/* rolling.c - the exact rolling minute of one limited dimension (see rolling.h). */
#include "rolling.h"

#include <stdbool.h>
#include <stdlib.h>

/* Entries a window starts with; it doubles from here up to SL_SIM_ROLLING_ENTRIES_MAX. */
#define ENTRIES_INITIAL 64

/* The costs charged at one millisecond. */
typedef struct {
    int64_t at_ms;
    int64_t cost;
} charge_t;

struct sl_sim_rolling {
    int64_t limit;
    int64_t window_ms;
    int64_t last_ms;   /* the latest time seen: an earlier one counts as this one */
    charge_t *charges; /* a ring of cap entries; len of them from head on, oldest first */
    size_t cap;
    size_t head;
    size_t len;
    int64_t sum; /* of the costs of the len entries */
};

sl_err_t sl_sim_rolling_new(int64_t limit, int64_t window_ms, int64_t now_ms,
                            sl_sim_rolling_t **out)
{
    *out = NULL;
    if (limit < 1 || window_ms < 1)
        return SL_EINVAL;
    sl_sim_rolling_t *win = calloc(1, sizeof *win);
    if (win == NULL)
        return SL_ENOMEM;
    win->charges = calloc(ENTRIES_INITIAL, sizeof *win->charges);
    if (win->charges == NULL) {
        free(win);
        return SL_ENOMEM;
    }
    win->cap = ENTRIES_INITIAL;
    win->limit = limit;
    win->window_ms = window_ms;
    win->last_ms = now_ms;
    *out = win;
    return SL_OK;
}

void sl_sim_rolling_free(sl_sim_rolling_t *win)
{
    if (win == NULL)
        return;
    free(win->charges);
    free(win);
}

static const charge_t *charge_at(const sl_sim_rolling_t *win, size_t i)
{
    return &win->charges[(win->head + i) % win->cap];
}

/* now_ms, or the last time seen when that is later. */
static int64_t time_at(const sl_sim_rolling_t *win, int64_t now_ms)
{
    return now_ms > win->last_ms ? now_ms : win->last_ms;
}

/* Whether a charge made at at_ms still counts at now_ms. */
static bool counts_at(const sl_sim_rolling_t *win, int64_t at_ms, int64_t now_ms)
{
    return now_ms - at_ms < win->window_ms;
}

/* Moves the window to now_ms and drops the entries that have expired by then. */
static void expire(sl_sim_rolling_t *win, int64_t now_ms)
{
    win->last_ms = time_at(win, now_ms);
    while (win->len > 0 && !counts_at(win, charge_at(win, 0)->at_ms, win->last_ms)) {
        win->sum -= charge_at(win, 0)->cost;
        win->head = (win->head + 1) % win->cap;
        win->len--;
    }
}

/* Whether a charge at the window's last time would share the newest entry. */
static bool joins_newest(const sl_sim_rolling_t *win)
{
    return win->len > 0 && charge_at(win, win->len - 1)->at_ms == win->last_ms;
}

/* Doubles the ring within its bound, keeping the entries in order; false when at the bound or out
 * of memory, with the ring as it was. */
static bool grow(sl_sim_rolling_t *win)
{
    if (win->cap >= SL_SIM_ROLLING_ENTRIES_MAX)
        return false;
    size_t cap =
        win->cap * 2 < SL_SIM_ROLLING_ENTRIES_MAX ? win->cap * 2 : SL_SIM_ROLLING_ENTRIES_MAX;
    charge_t *charges = malloc(cap * sizeof *charges);
    if (charges == NULL)
        return false;
    for (size_t i = 0; i < win->len; i++)
        charges[i] = *charge_at(win, i);
    free(win->charges);
    win->charges = charges;
    win->cap = cap;
    win->head = 0;
    return true;
}

/* Costs above the limit exceed it either way; clamping them keeps the sum inside int64_t. */
static int64_t clamp_cost(const sl_sim_rolling_t *win, int64_t cost)
{
    return cost < 0 ? 0 : cost > win->limit ? win->limit + 1 : cost;
}

int64_t sl_sim_rolling_wait_ms(sl_sim_rolling_t *win, int64_t cost, int64_t now_ms)
{
    expire(win, now_ms);
    int64_t c = clamp_cost(win, cost);
    if (c == 0)
        return 0;
    int64_t need = c < win->limit ? c : win->limit;
    int64_t excess = win->sum + need - win->limit;
    /* A full ring that cannot grow has a place again when its oldest entry expires. */
    int64_t wait_ms = 0;
    if (win->len == win->cap && !joins_newest(win) && !grow(win))
        wait_ms = charge_at(win, 0)->at_ms + win->window_ms - win->last_ms;
    /* Enough room comes when the oldest entries whose costs make up the excess have expired. */
    int64_t freed = 0;
    for (size_t i = 0; excess > 0 && i < win->len; i++) {
        const charge_t *oldest = charge_at(win, i);
        freed += oldest->cost;
        if (freed >= excess) {
            int64_t room_ms = oldest->at_ms + win->window_ms - win->last_ms;
            if (room_ms > wait_ms)
                wait_ms = room_ms;
            break;
        }
    }
    return wait_ms;
}

void sl_sim_rolling_add(sl_sim_rolling_t *win, int64_t cost, int64_t now_ms)
{
    expire(win, now_ms);
    int64_t c = clamp_cost(win, cost);
    if (c == 0)
        return;
    win->sum += c;
    if (joins_newest(win) || (win->len == win->cap && !grow(win))) {
        win->charges[(win->head + win->len - 1) % win->cap].cost += c;
        return;
    }
    win->charges[(win->head + win->len) % win->cap] = (charge_t){.at_ms = win->last_ms, .cost = c};
    win->len++;
}

int64_t sl_sim_rolling_sum(const sl_sim_rolling_t *win, int64_t now_ms)
{
    int64_t at_ms = time_at(win, now_ms);
    int64_t sum = win->sum;
    for (size_t i = 0; i < win->len && !counts_at(win, charge_at(win, i)->at_ms, at_ms); i++)
        sum -= charge_at(win, i)->cost;
    return sum;
}

size_t sl_sim_rolling_entries(const sl_sim_rolling_t *win)
{
    return win->len;
}

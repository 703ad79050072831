/* The compiled core of the XPush machine (machine.py: run, _eval, _pop, _add, _accept, _answer,
 * the tables, the predicate index's tests).
 *
 * A StateKernel holds a workload's AFA as flat arrays (per state a StateInfo record: its
 * kind, where its ε-successors, watchers and back table entries are, whether it proves
 * filters as an early or an initial state; the back table state -> {label: states
 * stepping into it} with labels by id; the order optimization's preconditions). It owns
 * the machine's interned sets of AFA states (`states`, a SetStore of sorted int32 arrays
 * with a hash table), known by their ids: the top-down and bottom-up machine states, and
 * the early and initial states that prove filters. It owns the machine's tables too
 * (push, leaf, close, add, values: open addressing over int keys; `table(name)` shows one
 * to Python as a mapping like the Python machine's dicts). On those ids it computes what
 * the Python methods compute on frozensets (XPushMachine._eval, _pop, _add, _accept,
 * _answer, _compute_push):
 *
 *   eval_pop(bases, qt, label, parent_qt) -> (up, proven)
 *       eval(q) at a node with top-down state qt, then t_pop: the parent's
 *       states the matched ones complete, and the early states matched (they
 *       prove their filters), both interned;
 *   push(qt, label) -> t_push, the child's top-down state;
 *   add(left, right) -> the union (t_add^b), less what the order optimization drops;
 *   accept(bases, qt) -> the initial and early states matched at the document node;
 *   answer(found, proven) -> a document's answer: the ranks of the filters its
 *       accepted and proven states prove (ids_of makes the list of their ids);
 *   walk(...) -> the table walk: the tables followed over a document's events,
 *       every missing entry computed here, values tested with the ValueIndex of
 *       the top-down state (set_values); only a miss at a top-down state without
 *       one yet calls back into Python.
 *
 * A ValueIndex is a PredicateIndex's tables tested in C. Filters are their ranks
 * (position in ascending id order). bases is a tuple of set ids or iterables of states
 * (their union is the base). A top-down state's enabled states are kept as a bitmap,
 * built once per state; membership uses arrays of stamps (one generation per call), so a
 * call costs time in what it touches, not in the size of the AFA.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#include "filter_text.h"

enum { OR = 0, AND = 1, NOT = 2 };
enum { OPEN = 0, ATTR = 1, TEXT = 2, CLOSE = 3 };

typedef struct {
    int32_t *data;
    Py_ssize_t len, cap;
} IntVec;

/* Make room for `extra` more items in `v`. */
static int vec_reserve(IntVec *v, Py_ssize_t extra)
{
    if (v->len + extra <= v->cap)
        return 0;
    Py_ssize_t cap = v->cap ? v->cap : 256;
    while (cap < v->len + extra)
        cap *= 2;
    int32_t *data = PyMem_Realloc(v->data, (size_t)cap * sizeof(int32_t));
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    v->data = data;
    v->cap = cap;
    return 0;
}

static inline int vec_push(IntVec *v, int32_t x)
{
    if (v->len == v->cap && vec_reserve(v, 1) < 0)
        return -1;
    v->data[v->len++] = x;
    return 0;
}

/* The states to decide, smallest first: a bitmap with a summary bitmap over its words
 * (bit w of the summary: word w is not zero). eval takes states out in increasing order
 * and puts in only larger ones (watchers have larger numbers), so finding the next is a
 * short scan; a binary heap spent most of eval's time in mispredicted sifts. */
typedef struct {
    uint64_t *bits, *summary;
    int32_t cursor; /* no state below it is queued */
    int32_t count;
} Queue;

static inline void queue_put(Queue *q, int32_t s)
{
    int32_t w = s >> 6;
    if (!((q->bits[w] >> (s & 63)) & 1)) {
        q->bits[w] |= (uint64_t)1 << (s & 63);
        q->summary[w >> 6] |= (uint64_t)1 << (w & 63);
        q->count++;
    }
    if (s < q->cursor)
        q->cursor = s;
}

/* The smallest queued state, taken out (the queue must not be empty). */
static inline int32_t queue_take(Queue *q)
{
    int32_t w = q->cursor >> 6;
    uint64_t b = q->bits[w] & (~(uint64_t)0 << (q->cursor & 63));
    if (b == 0) {
        int32_t v = (w + 1) >> 6;
        uint64_t sb = (w + 1) & 63 ? q->summary[v] & (~(uint64_t)0 << ((w + 1) & 63)) : q->summary[v];
        while (sb == 0)
            sb = q->summary[++v];
        w = (v << 6) + __builtin_ctzll(sb);
        b = q->bits[w];
    }
    int32_t s = (w << 6) + __builtin_ctzll(b);
    q->bits[w] &= ~((uint64_t)1 << (s & 63));
    if (q->bits[w] == 0)
        q->summary[w >> 6] &= ~((uint64_t)1 << (w & 63));
    q->cursor = s + 1;
    q->count--;
    return s;
}


/* A zeroed bitmap for sort_unique over [0, limit): a bit per item, then a bit per word
 * of those (the summary). */
static Py_ssize_t bitmap_words(Py_ssize_t limit)
{
    return limit / 64 + 1;
}

static uint64_t *bitmap_new(Py_ssize_t limit)
{
    Py_ssize_t words = bitmap_words(limit);
    return PyMem_Calloc((size_t)(words + words / 64 + 1), sizeof(uint64_t));
}

/* Sort the items in `v` (all in [0, limit)) and drop the repeated ones. Already in order
 * (often: one state's filters) costs one pass; few items: insertion sort; more: `bits`
 * (bitmap_new(limit)), set with a summary bit per word set, read back in order through the
 * summary (limit / 4096 words) and left zeroed. */
static void sort_unique(IntVec *v, uint64_t *bits, Py_ssize_t limit)
{
    int32_t *d = v->data;
    Py_ssize_t n = v->len, kept = 0, ordered = 1;
    for (Py_ssize_t i = 1; i < n && ordered; i++)
        ordered = d[i - 1] < d[i];
    if (ordered)
        return;
    if (n < 24) { /* insertion sort */
        for (Py_ssize_t i = 1; i < n; i++) {
            int32_t x = d[i];
            Py_ssize_t j = i;
            for (; j >= 1 && d[j - 1] > x; j--)
                d[j] = d[j - 1];
            d[j] = x;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (kept == 0 || d[i] != d[kept - 1])
                d[kept++] = d[i];
        v->len = kept;
        return;
    }
    Py_ssize_t words = bitmap_words(limit);
    uint64_t *summary = bits + words;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t w = d[i] >> 6;
        bits[w] |= (uint64_t)1 << (d[i] & 63);
        summary[w >> 6] |= (uint64_t)1 << (w & 63);
    }
    for (Py_ssize_t u = 0; u <= (words - 1) >> 6; u++) {
        for (uint64_t a = summary[u]; a; a &= a - 1) {
            int32_t w = (int32_t)(u << 6) + __builtin_ctzll(a);
            for (uint64_t b = bits[w]; b; b &= b - 1)
                d[kept++] = (w << 6) + __builtin_ctzll(b);
            bits[w] = 0;
        }
        summary[u] = 0;
    }
    v->len = kept;
}

/* ----- answers as JSON lists of filter ids (json_list, StateKernel.answer_json) ----- */

/* Every filter's id as JSON text (UTF-8), by rank, in a 16-byte slot each (slots: n of
 * them, made by json_slots): an id of up to 15 bytes is in its slot, its length in the
 * slot's last byte; a longer one (last byte 0xFF) is in text (size bytes) from the int64 at
 * the slot's start, for the int32 after it. One slot per id: an answer's ids, far apart in
 * a large filter set, cost a cache line each, not one for where an id ends and one for its
 * text. ascii: all ASCII; widest: the longest. */
typedef struct {
    const unsigned char *slots;
    const char *text;
    Py_ssize_t size, n, widest;
    int ascii;
} JsonIds;

enum { JSON_SLOT = 16, JSON_SHORT = JSON_SLOT - 1, JSON_LONG = 0xFF };
enum { PLAN_AHEAD = 8 };   /* filters ahead whose constants are asked for (plan_counted) */
enum { JSON_AHEAD = 16 }; /* ids ahead whose slots are asked for (json_list) */

/* The JsonIds of slots and texts (buffers), or -1 with an error where they disagree. */
static int json_ids_of(const Py_buffer *slots, const Py_buffer *texts, int ascii,
                       Py_ssize_t widest, JsonIds *ids)
{
    *ids = (JsonIds){slots->buf, texts->buf, texts->len, slots->len / JSON_SLOT, widest, ascii};
    if (slots->len % JSON_SLOT || widest < 0) {
        PyErr_SetString(PyExc_ValueError, "ids: 16-byte slots (json_slots), widest >= 0");
        return -1;
    }
    return 0;
}

/* Where id r's text is and how long it is (a long id out of text's bounds: none). */
static inline const char *json_id(const JsonIds *ids, int32_t r, Py_ssize_t *length)
{
    const unsigned char *slot = ids->slots + (size_t)r * JSON_SLOT;
    if (slot[JSON_SHORT] <= JSON_SHORT) {
        *length = slot[JSON_SHORT];
        return (const char *)slot;
    }
    int64_t start;
    int32_t size;
    memcpy(&start, slot, sizeof start);
    memcpy(&size, slot + sizeof start, sizeof size);
    int fits = start >= 0 && size >= 0 && start <= ids->size && size <= ids->size - start;
    *length = fits ? size : 0;
    return fits ? ids->text + start : ids->text;
}

static inline Py_ssize_t json_id_length(const JsonIds *ids, int32_t r)
{
    Py_ssize_t length;
    json_id(ids, r, &length);
    return length;
}

/* json_slots(texts, ends) -> bytes: the slots of JsonIds for the ids in texts, id r ending
 * at ends[r] (int64). */
static PyObject *json_slots(PyObject *module, PyObject *args)
{
    Py_buffer texts, ends;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*", &texts, &ends))
        return NULL;
    const int64_t *end = ends.buf;
    Py_ssize_t n = ends.len / 8;
    if (ends.len % 8 || (n && end[n - 1] != texts.len) || n > PY_SSIZE_T_MAX / JSON_SLOT) {
        PyErr_SetString(PyExc_ValueError, "json_slots: ends int64 ending at texts");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * JSON_SLOT);
    if (out == NULL)
        goto done;
    unsigned char *slot = (unsigned char *)PyBytes_AS_STRING(out);
    memset(slot, 0, (size_t)n * JSON_SLOT);
    for (Py_ssize_t r = 0; r < n; r++, slot += JSON_SLOT) {
        int64_t start = r ? end[r - 1] : 0, length = end[r] - start;
        if (start < 0 || length < 0 || end[r] > texts.len || length > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "json_slots: ends ascending, within texts");
            Py_CLEAR(out);
            break;
        }
        if (length <= JSON_SHORT) {
            memcpy(slot, (const char *)texts.buf + start, (size_t)length);
            slot[JSON_SHORT] = (unsigned char)length;
        } else {
            int32_t size = (int32_t)length;
            memcpy(slot, &start, sizeof start);
            memcpy(slot + sizeof start, &size, sizeof size);
            slot[JSON_SHORT] = JSON_LONG;
        }
    }
done:
    PyBuffer_Release(&texts);
    PyBuffer_Release(&ends);
    return out;
}

/* Room for a list of `count` ids, brackets and commas: at most the widest each (short
 * ids); 0 when they are too long for a bound (the caller sums their lengths). */
static Py_ssize_t json_room(const JsonIds *ids, Py_ssize_t count)
{
    return ids->widest <= 32 ? 2 + count + count * ids->widest : 0;
}

/* A buffer of `room` bytes for a list's text: the data of a new str where the ids are ASCII
 * (*out), else memory of its own; NULL with an error. */
static char *json_buffer(const JsonIds *ids, Py_ssize_t room, PyObject **out)
{
    *out = ids->ascii ? PyUnicode_New(room, 127) : NULL;
    char *buffer = ids->ascii ? (*out ? (char *)PyUnicode_1BYTE_DATA(*out) : NULL)
                              : PyMem_Malloc((size_t)room);
    if (buffer == NULL && !PyErr_Occurred())
        PyErr_NoMemory();
    return buffer;
}

/* The str of a list written into `buffer` up to `at` (json_buffer's; freed or cut). */
static PyObject *json_done(const JsonIds *ids, PyObject *out, char *buffer, const char *at)
{
    if (!ids->ascii) {
        out = PyUnicode_DecodeUTF8(buffer, at - buffer, "strict");
        PyMem_Free(buffer);
    } else if (PyUnicode_Resize(&out, at - buffer) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

/* Write id r (in range) at `at`, after a ',' unless `at` is just past the list's '['
 * (buffer + 1); `stop` ends the buffer: the new end. A short id is its slot's one fixed
 * 16-byte copy (inlined) where the buffer has room, the bytes past the id overwritten by
 * what follows. */
static inline char *put_json_id(const JsonIds *ids, int32_t r, char *at, const char *buffer,
                                const char *stop)
{
    Py_ssize_t length;
    const char *text = json_id(ids, r, &length);
    if (at > buffer + 1)
        *at++ = ',';
    if (length <= JSON_SHORT && stop - at >= JSON_SLOT)
        memcpy(at, text, JSON_SLOT);
    else
        memcpy(at, text, (size_t)length);
    return at + length;
}

/* The JSON list of the ids whose bits are set in `bits` (ranks in [0, ids->n), a summary
 * bit per word set, as sort_unique leaves them: left zeroed), at most `count` of them. */
static PyObject *json_from_bits(const JsonIds *ids, uint64_t *bits, Py_ssize_t count)
{
    Py_ssize_t words = bitmap_words(ids->n), room = json_room(ids, count);
    uint64_t *summary = bits + words;
    if (room == 0) { /* long ids: their lengths summed */
        room = 2;
        for (Py_ssize_t u = 0; u <= (words - 1) >> 6; u++)
            for (uint64_t a = summary[u]; a; a &= a - 1) {
                int32_t w = (int32_t)(u << 6) + __builtin_ctzll(a);
                for (uint64_t b = bits[w]; b; b &= b - 1)
                    room += 1 + json_id_length(ids, (w << 6) + __builtin_ctzll(b));
            }
    }
    PyObject *out;
    char *buffer = json_buffer(ids, room, &out), *at = buffer;
    if (buffer != NULL)
        *at++ = '[';
    for (Py_ssize_t u = 0; u <= (words - 1) >> 6; u++) {
        for (uint64_t a = summary[u]; a; a &= a - 1) {
            int32_t w = (int32_t)(u << 6) + __builtin_ctzll(a);
            for (uint64_t b = bits[w]; b && buffer; b &= b - 1)
                at = put_json_id(ids, (w << 6) + __builtin_ctzll(b), at, buffer, buffer + room);
            bits[w] = 0;
        }
        summary[u] = 0;
    }
    if (buffer == NULL)
        return NULL;
    *at++ = ']';
    return json_done(ids, out, buffer, at);
}

/* The ints of an iterable appended to `out`, each checked to be in [low, limit); -1 with
 * an error. */
static int read_ints(PyObject *items, long low, long limit, IntVec *out)
{
    PyObject *iterator = PyObject_GetIter(items), *item;
    if (iterator == NULL)
        return -1;
    while ((item = PyIter_Next(iterator)) != NULL) {
        long x = PyLong_AsLong(item);
        Py_DECREF(item);
        if (x == -1 && PyErr_Occurred())
            break;
        if (x < low || x >= limit) {
            PyErr_Format(PyExc_ValueError, "item %ld out of range", x);
            break;
        }
        if (vec_push(out, (int32_t)x) < 0)
            break;
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

/* ----- SetStore: interned sets of ints, each a sorted int32 array, known by its id ----- */

typedef struct {
    PyObject_HEAD
    int32_t limit;     /* items are in [-1, limit): -1 marks the top-down state "all" */
    IntVec items;      /* set k is items[at[k] .. at[k + 1]] */
    Py_ssize_t *at, count, cap;
    uint64_t *hash;    /* per set */
    int32_t *slots;    /* open addressing: set ids, -1 for none */
    Py_ssize_t slot_count;
    Py_ssize_t held;   /* elements of all sets plus one per set (the machine's memory measure) */
    uint64_t *bits;    /* a zeroed bitmap of `limit` bits for sort_unique */
} SetStore;

static PyTypeObject SetStoreType;

static uint64_t hash_items(const int32_t *x, Py_ssize_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (uint32_t)x[i];
        h *= 0xFF51AFD7ED558CCDULL;
        h ^= h >> 31;
    }
    return h;
}

static void store_clear(SetStore *st)
{
    st->items.len = 0;
    st->count = 0;
    st->held = 0;
    if (st->slots)
        memset(st->slots, 0xFF, (size_t)st->slot_count * sizeof(int32_t));
}

static int store_grow_slots(SetStore *st)
{
    Py_ssize_t count = st->slot_count ? 2 * st->slot_count : 1024;
    int32_t *slots = PyMem_Malloc((size_t)count * sizeof(int32_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xFF, (size_t)count * sizeof(int32_t));
    for (Py_ssize_t k = 0; k < st->count; k++) {
        size_t i = (size_t)st->hash[k] & (size_t)(count - 1);
        while (slots[i] >= 0)
            i = (i + 1) & (size_t)(count - 1);
        slots[i] = (int32_t)k;
    }
    PyMem_Free(st->slots);
    st->slots = slots;
    st->slot_count = count;
    return 0;
}

/* The id of the set of the n sorted, unique items x (added when new), or -1 with an
 * error. x must not point into the store. */
static Py_ssize_t store_intern(SetStore *st, const int32_t *x, Py_ssize_t n)
{
    if (2 * (st->count + 1) > st->slot_count && store_grow_slots(st) < 0)
        return -1;
    uint64_t h = hash_items(x, n);
    size_t mask = (size_t)st->slot_count - 1, i = (size_t)h & mask;
    for (int32_t k; (k = st->slots[i]) >= 0; i = (i + 1) & mask)
        if (st->hash[k] == h && st->at[k + 1] - st->at[k] == n &&
            (n == 0 || memcmp(st->items.data + st->at[k], x, (size_t)n * sizeof(int32_t)) == 0))
            return k;
    if (st->count + 2 > st->cap) {
        Py_ssize_t cap = st->cap ? 2 * st->cap : 1024;
        if (cap >= INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "too many interned sets");
            return -1;
        }
        Py_ssize_t *at = PyMem_Realloc(st->at, (size_t)(cap + 1) * sizeof(Py_ssize_t));
        if (at == NULL)
            return PyErr_NoMemory(), -1;
        st->at = at;
        uint64_t *hash = PyMem_Realloc(st->hash, (size_t)cap * sizeof(uint64_t));
        if (hash == NULL)
            return PyErr_NoMemory(), -1;
        st->hash = hash;
        st->cap = cap;
    }
    if (vec_reserve(&st->items, n) < 0)
        return -1;
    Py_ssize_t k = st->count++;
    st->at[0] = 0;
    if (n)
        memcpy(st->items.data + st->items.len, x, (size_t)n * sizeof(int32_t));
    st->items.len += n;
    st->at[k + 1] = st->items.len;
    st->hash[k] = h;
    st->slots[i] = (int32_t)k;
    st->held += n + 1;
    return k;
}

static inline const int32_t *store_items(SetStore *st, Py_ssize_t k, Py_ssize_t *n)
{
    *n = st->at[k + 1] - st->at[k];
    return st->items.data + st->at[k];
}

/* The value of an int object in [0, limit), or -1 with `error` naming `what`. */
static Py_ssize_t index_of(PyObject *item, Py_ssize_t limit, PyObject *error, const char *what)
{
    Py_ssize_t k = PyLong_AsSsize_t(item);
    if (k == -1 && PyErr_Occurred())
        return -1;
    if (k < 0 || k >= limit) {
        PyErr_Format(error, "%s %zd out of range", what, k);
        return -1;
    }
    return k;
}

/* The set an int object names, or -1 with an error. */
static Py_ssize_t store_id(SetStore *st, PyObject *id)
{
    return index_of(id, st->count, PyExc_IndexError, "interned set");
}

static SetStore *store_new(int32_t limit)
{
    SetStore *st = PyObject_New(SetStore, &SetStoreType);
    if (st == NULL)
        return NULL;
    st->limit = limit;
    st->items = (IntVec){NULL, 0, 0};
    st->at = NULL;
    st->hash = NULL;
    st->slots = NULL;
    st->bits = NULL;
    st->count = st->cap = st->slot_count = st->held = 0;
    if (!(st->bits = bitmap_new(limit))) {
        Py_DECREF(st);
        return (SetStore *)PyErr_NoMemory();
    }
    return st;
}

static void store_dealloc(SetStore *st)
{
    PyMem_Free(st->items.data);
    PyMem_Free(st->at);
    PyMem_Free(st->hash);
    PyMem_Free(st->slots);
    PyMem_Free(st->bits);
    PyObject_Free(st);
}

static Py_ssize_t store_length(SetStore *st)
{
    return st->count;
}

static PyObject *store_item(SetStore *st, Py_ssize_t k)
{
    if (k < 0 || k >= st->count) {
        PyErr_SetString(PyExc_IndexError, "no such interned set");
        return NULL;
    }
    Py_ssize_t n;
    const int32_t *x = store_items(st, k, &n);
    PyObject *out = PyFrozenSet_New(NULL);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *item = PyLong_FromLong(x[i]);
        if (item == NULL || PySet_Add(out, item) < 0)
            Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

/* intern(states): the id of a set given as an iterable of ints, added when new. */
static PyObject *store_intern_method(SetStore *st, PyObject *items)
{
    IntVec v = {NULL, 0, 0};
    PyObject *out = NULL;
    if (read_ints(items, -1, st->limit, &v) == 0) {
        Py_ssize_t kept = 0;
        for (Py_ssize_t i = 0; i < v.len; i++) /* -1, the top-down state "all", goes first */
            if (v.data[i] >= 0)
                v.data[kept++] = v.data[i];
        int all = kept < v.len;
        v.len = kept;
        sort_unique(&v, st->bits, st->limit);
        if (all && vec_push(&v, -1) == 0) {
            memmove(v.data + 1, v.data, (size_t)(v.len - 1) * sizeof(int32_t));
            v.data[0] = -1;
        }
        Py_ssize_t k = PyErr_Occurred() ? -1 : store_intern(st, v.data, v.len);
        out = k < 0 ? NULL : PyLong_FromSsize_t(k);
    }
    PyMem_Free(v.data);
    return out;
}

static PyMethodDef store_methods[] = {
    {"intern", (PyCFunction)store_intern_method, METH_O,
     "intern(items) -> id: a set given as an iterable of ints, interned"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef store_members[] = {
    {"held", T_PYSSIZET, offsetof(SetStore, held), READONLY,
     "elements of all sets plus one per set"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods store_sequence = {
    .sq_length = (lenfunc)store_length,
    .sq_item = (ssizeargfunc)store_item,
};

static PyTypeObject SetStoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.SetStore",
    .tp_basicsize = sizeof(SetStore),
    .tp_dealloc = (destructor)store_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A StateKernel's interned sets of states: store[id] -> the set (a frozenset)",
    .tp_methods = store_methods,
    .tp_members = store_members,
    .tp_as_sequence = &store_sequence,
};

/* ----- TextMatcher: starts-with and contains predicates on a value's UTF-8 bytes ----- */

/* The patterns of starts-with predicates in a trie (root PREFIX_ROOT) and those of contains
 * predicates in an Aho-Corasick automaton (root INFIX_ROOT), over UTF-8 bytes: a string
 * starts with or contains another exactly when its UTF-8 bytes do. Edges are one open
 * addressing table keyed by (node, byte); each node has the states of the patterns ending
 * there (a linked list), its failure link and its output link (the next node on the
 * failure chain where patterns end). One pass over the value's bytes finds every match:
 * the Python _Trie and _AhoCorasick (predicates.py) are the reference. */
enum { PREFIX_ROOT = 0, INFIX_ROOT = 1 };

/* Open addressing from a uint64 key (never 0, which marks an empty slot) to an int32: the
 * edges of a trie, (node, label) → child (the TextMatcher's by byte, the Counter's by
 * label). Grown at half full. */
typedef struct {
    uint64_t *keys;
    int32_t *values;
    Py_ssize_t slots, count; /* slots: a power of two, or 0 */
} EdgeMap;

static inline Py_ssize_t edges_slot(const EdgeMap *m, uint64_t key)
{
    uint64_t h = key ^ key >> 33;
    h *= 0xff51afd7ed558ccdULL;
    Py_ssize_t mask = m->slots - 1, i = (Py_ssize_t)((h ^ h >> 33) & (uint64_t)mask);
    while (m->keys[i] != 0 && m->keys[i] != key)
        i = (i + 1) & mask;
    return i;
}

/* The value of key, or -1. */
static inline int32_t edges_get(const EdgeMap *m, uint64_t key)
{
    if (m->slots == 0)
        return -1;
    Py_ssize_t i = edges_slot(m, key);
    return m->keys[i] ? m->values[i] : -1;
}

/* Room for count keys in all: -1 with an error when there is no memory. */
static int edges_reserve(EdgeMap *m, Py_ssize_t count)
{
    if (2 * count <= m->slots)
        return 0;
    Py_ssize_t slots = m->slots ? m->slots : 64;
    while (2 * count > slots)
        slots *= 2;
    EdgeMap grown = {PyMem_Calloc((size_t)slots, sizeof(uint64_t)),
                     PyMem_Malloc((size_t)slots * sizeof(int32_t)), slots, m->count};
    if (grown.keys == NULL || grown.values == NULL) {
        PyMem_Free(grown.keys);
        PyMem_Free(grown.values);
        return PyErr_NoMemory(), -1;
    }
    for (Py_ssize_t i = 0; i < m->slots; i++)
        if (m->keys[i] != 0) {
            Py_ssize_t k = edges_slot(&grown, m->keys[i]);
            grown.keys[k] = m->keys[i];
            grown.values[k] = m->values[i];
        }
    PyMem_Free(m->keys);
    PyMem_Free(m->values);
    *m = grown;
    return 0;
}

/* Set key's value: -1 with an error when there is no memory. */
static int edges_put(EdgeMap *m, uint64_t key, int32_t value)
{
    if (edges_reserve(m, m->count + 1) < 0)
        return -1;
    Py_ssize_t i = edges_slot(m, key);
    m->count += m->keys[i] == 0;
    m->keys[i] = key;
    m->values[i] = value;
    return 0;
}

static void edges_free(EdgeMap *m)
{
    PyMem_Free(m->keys);
    PyMem_Free(m->values);
    m->keys = NULL, m->values = NULL, m->slots = m->count = 0;
}

typedef struct {
    PyObject_HEAD
    int32_t limit;
    IntVec fail, output, ends, first_child, next_sibling, byte; /* per node */
    IntVec end_state, end_next;                                  /* the lists of ends */
    EdgeMap edges;                                               /* (node << 8 | byte) + 1 → child */
    /* the infix automaton as a DFA (failures followed already) over byte classes: a row
     * of `classes` entries per node that has one (row[node], else -1), the root's and then
     * breadth first while they fit the budget; a byte's class cls[byte]. An entry is the
     * next node's row times two, plus one where its hit is not -1, or -1 - the next node
     * where that has no row; hit[row]: the first node on the row's node's output chain
     * where patterns end (itself, if they end there), or -1. Scanning a text is then one
     * load per byte, where the rows are (and one more where a pattern ends). */
    int32_t *rows, *row, *hit, classes;
    int32_t cls[256];
    Py_ssize_t budget; /* at most so many entries (int32) in rows */
} TextMatcher;

static PyTypeObject TextMatcherType;

static int32_t tm_child(const TextMatcher *t, int32_t node, uint8_t b)
{
    return edges_get(&t->edges, ((uint64_t)node << 8 | b) + 1);
}

static int32_t tm_new_node(TextMatcher *t, int32_t b)
{
    int32_t node = (int32_t)t->fail.len;
    if (vec_push(&t->fail, INFIX_ROOT) < 0 || vec_push(&t->output, -1) < 0 ||
        vec_push(&t->ends, -1) < 0 || vec_push(&t->first_child, -1) < 0 ||
        vec_push(&t->next_sibling, -1) < 0 || vec_push(&t->byte, b) < 0)
        return -1;
    return node;
}

/* The child of node by b, made when missing. */
static int32_t tm_step(TextMatcher *t, int32_t node, uint8_t b)
{
    int32_t child = tm_child(t, node, b);
    if (child >= 0)
        return child;
    if ((child = tm_new_node(t, b)) < 0 || edges_put(&t->edges, ((uint64_t)node << 8 | b) + 1, child) < 0)
        return -1;
    t->next_sibling.data[child] = t->first_child.data[node];
    t->first_child.data[node] = child;
    return child;
}

/* Add the patterns of a dict {bytes: [states]} under root. */
static int tm_add(TextMatcher *t, int32_t root, PyObject *patterns)
{
    PyObject *pattern, *states;
    Py_ssize_t pos = 0;
    while (PyDict_Next(patterns, &pos, &pattern, &states)) {
        if (!PyBytes_Check(pattern)) {
            PyErr_SetString(PyExc_TypeError, "TextMatcher: patterns are bytes");
            return -1;
        }
        const uint8_t *at = (const uint8_t *)PyBytes_AS_STRING(pattern);
        int32_t node = root;
        for (Py_ssize_t i = 0; node >= 0 && i < PyBytes_GET_SIZE(pattern); i++)
            node = tm_step(t, node, at[i]);
        IntVec found = {NULL, 0, 0};
        if (node < 0 || read_ints(states, 0, t->limit, &found) < 0) {
            PyMem_Free(found.data);
            return -1;
        }
        for (Py_ssize_t i = 0; i < found.len; i++) {
            if (vec_push(&t->end_state, found.data[i]) < 0 ||
                vec_push(&t->end_next, t->ends.data[node]) < 0) {
                PyMem_Free(found.data);
                return -1;
            }
            t->ends.data[node] = (int32_t)t->end_state.len - 1;
        }
        PyMem_Free(found.data);
    }
    return 0;
}

/* The failure and output links of the infix automaton, breadth first. */
static int tm_links(TextMatcher *t)
{
    IntVec queue = {NULL, 0, 0};
    int32_t *fail = t->fail.data, *output = t->output.data, *ends = t->ends.data;
    for (int32_t c = t->first_child.data[INFIX_ROOT]; c >= 0; c = t->next_sibling.data[c])
        if (vec_push(&queue, c) < 0)
            return -1;
    for (Py_ssize_t head = 0; head < queue.len; head++) {
        int32_t node = queue.data[head];
        for (int32_t c = t->first_child.data[node]; c >= 0; c = t->next_sibling.data[c]) {
            uint8_t b = (uint8_t)t->byte.data[c];
            int32_t f = fail[node], g;
            while ((g = tm_child(t, f, b)) < 0 && f != INFIX_ROOT)
                f = fail[f];
            fail[c] = g >= 0 && g != c ? g : INFIX_ROOT;
            output[c] = fail[c] != INFIX_ROOT && ends[fail[c]] >= 0 ? fail[c] : output[fail[c]];
            if (vec_push(&queue, c) < 0) {
                PyMem_Free(queue.data);
                return -1;
            }
        }
    }
    PyMem_Free(queue.data);
    return 0;
}

/* The rows of the infix automaton (after tm_links): every byte that no contains pattern
 * has is class 0 (from anywhere it leads to the root), every other byte a class of its
 * own. A node's row is its failure's with its own children put in; a node's failure is
 * nearer the root, so breadth first it has its row already. */
static int tm_rows(TextMatcher *t)
{
    IntVec order = {NULL, 0, 0}; /* the infix nodes, breadth first */
    t->classes = 1;
    if (vec_push(&order, INFIX_ROOT) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < order.len; k++)
        for (int32_t c = t->first_child.data[order.data[k]]; c >= 0; c = t->next_sibling.data[c]) {
            uint8_t b = (uint8_t)t->byte.data[c];
            if (t->cls[b] == 0)
                t->cls[b] = t->classes++;
            if (vec_push(&order, c) < 0) {
                PyMem_Free(order.data);
                return -1;
            }
        }
    Py_ssize_t count = order.len < t->budget / t->classes ? order.len : t->budget / t->classes;
    count = count > 0 ? count : 1; /* the root's row, whatever the budget */
    count = count < INT32_MAX / 2 ? count : INT32_MAX / 2; /* (an entry holds twice a row) */
    if (!(t->row = PyMem_Malloc((size_t)t->fail.len * sizeof(int32_t))) ||
        !(t->hit = PyMem_Malloc((size_t)count * sizeof(int32_t))) ||
        !(t->rows = PyMem_Malloc((size_t)count * (size_t)t->classes * sizeof(int32_t)))) {
        PyMem_Free(order.data);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < t->fail.len; k++)
        t->row[k] = -1;
    for (int32_t k = 0; k < count; k++) {
        int32_t node = order.data[k], *row = t->rows + (Py_ssize_t)k * t->classes;
        t->row[node] = k;
        if (node == INFIX_ROOT)
            for (int32_t c = 0; c < t->classes; c++)
                row[c] = INFIX_ROOT;
        else
            memcpy(row, t->rows + (Py_ssize_t)t->row[t->fail.data[node]] * t->classes,
                   (size_t)t->classes * sizeof(int32_t));
        for (int32_t c = t->first_child.data[node]; c >= 0; c = t->next_sibling.data[c])
            row[t->cls[t->byte.data[c]]] = c;
    }
    for (int32_t k = 0; k < count; k++) {
        int32_t node = order.data[k];
        t->hit[k] = t->ends.data[node] >= 0 ? node : t->output.data[node];
    }
    for (int32_t k = 0; k < count; k++) { /* next nodes as their rows, where they have one */
        int32_t *row = t->rows + (Py_ssize_t)k * t->classes;
        for (int32_t c = 0; c < t->classes; c++) {
            int32_t next = t->row[row[c]];
            row[c] = next >= 0 ? 2 * next + (t->hit[next] >= 0) : -1 - row[c];
        }
    }
    PyMem_Free(order.data);
    return 0;
}

static int tm_append_ends(const TextMatcher *t, int32_t node, IntVec *out)
{
    for (int32_t e = t->ends.data[node]; e >= 0; e = t->end_next.data[e])
        if (vec_push(out, t->end_state.data[e]) < 0)
            return -1;
    return 0;
}

/* The states of the patterns that start or occur in value (a str), appended to out. */
static int tm_search(const TextMatcher *t, PyObject *value, IntVec *out)
{
    Py_ssize_t n;
    PyObject *encoded = NULL;
    const uint8_t *at = (const uint8_t *)PyUnicode_AsUTF8AndSize(value, &n);
    if (at == NULL) { /* a lone surrogate (from JSON): encoded as the patterns are */
        PyErr_Clear();
        encoded = PyUnicode_AsEncodedString(value, "utf-8", "surrogatepass");
        if (encoded == NULL)
            return -1;
        at = (const uint8_t *)PyBytes_AS_STRING(encoded);
        n = PyBytes_GET_SIZE(encoded);
    }
    int failed = tm_append_ends(t, PREFIX_ROOT, out) < 0 || tm_append_ends(t, INFIX_ROOT, out) < 0;
    for (int32_t node = PREFIX_ROOT, i = 0; !failed && i < n; i++) {
        if ((node = tm_child(t, node, at[i])) < 0)
            break;
        failed = tm_append_ends(t, node, out) < 0;
    }
    if (t->first_child.data[INFIX_ROOT] >= 0) {
        /* d: the row of the node the automaton is at, or -1 (then `node` is where it is) */
        int32_t d = t->row[INFIX_ROOT], node = INFIX_ROOT, o, g;
        for (Py_ssize_t i = 0; !failed && i < n; i++) {
            if (d < 0) { /* a node without a row: its edges, then its failures' */
                while (t->row[node] < 0 && (g = tm_child(t, node, at[i])) < 0)
                    node = t->fail.data[node]; /* (a failure ends at the root at the latest) */
                d = t->row[node];
                if (d < 0)
                    node = g;
            }
            int32_t entry = d >= 0 ? t->rows[(Py_ssize_t)d * t->classes + t->cls[at[i]]] : -1;
            if (d >= 0)
                d = entry >= 0 ? entry >> 1 : -1, node = entry >= 0 ? node : -1 - entry;
            for (o = d >= 0 ? (entry & 1 ? t->hit[d] : -1)
                            : t->ends.data[node] >= 0 ? node : t->output.data[node];
                 o >= 0 && !failed; o = t->output.data[o])
                failed = tm_append_ends(t, o, out) < 0;
        }
    }
    Py_XDECREF(encoded);
    return failed ? -1 : 0;
}

static void text_matcher_dealloc(TextMatcher *t)
{
    IntVec *vecs[] = {&t->fail, &t->output, &t->ends, &t->first_child, &t->next_sibling,
                      &t->byte, &t->end_state, &t->end_next};
    for (size_t k = 0; k < sizeof vecs / sizeof *vecs; k++)
        PyMem_Free(vecs[k]->data);
    edges_free(&t->edges);
    PyMem_Free(t->rows);
    PyMem_Free(t->row);
    PyMem_Free(t->hit);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *text_matcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"limit", "prefixes", "infixes", "rows", NULL};
    int limit;
    Py_ssize_t budget = 1 << 23; /* 32 MB of rows */
    PyObject *prefixes, *infixes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO!O!|n", keywords, &limit, &PyDict_Type,
                                     &prefixes, &PyDict_Type, &infixes, &budget))
        return NULL;
    TextMatcher *t = (TextMatcher *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->limit = limit;
    t->budget = budget;
    if (limit < 0 || tm_new_node(t, 0) < 0 || tm_new_node(t, 0) < 0 ||
        tm_add(t, PREFIX_ROOT, prefixes) < 0 || tm_add(t, INFIX_ROOT, infixes) < 0 ||
        tm_links(t) < 0 || tm_rows(t) < 0) {
        if (limit < 0)
            PyErr_SetString(PyExc_ValueError, "TextMatcher: limit ≥ 0");
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
}

/* matcher(value) -> list: the states of the patterns that start or occur in value */
static PyObject *text_matcher_call(TextMatcher *t, PyObject *args, PyObject *kwargs)
{
    PyObject *value;
    if (!PyArg_ParseTuple(args, "U", &value))
        return NULL;
    IntVec out = {NULL, 0, 0};
    PyObject *list = NULL;
    if (tm_search(t, value, &out) == 0 && (list = PyList_New(out.len)) != NULL)
        for (Py_ssize_t i = 0; i < out.len; i++)
            PyList_SET_ITEM(list, i, PyLong_FromLong(out.data[i]));
    PyMem_Free(out.data);
    return list;
}

static PyTypeObject TextMatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.TextMatcher",
    .tp_basicsize = sizeof(TextMatcher),
    .tp_dealloc = (destructor)text_matcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TextMatcher(limit, prefixes, infixes, rows=2**23): starts-with and contains "
              "predicates ({pattern as UTF-8 bytes: [states]}); matcher(value) -> the states "
              "that hold (a list, may repeat). rows: at most so many DFA entries (int32), the "
              "nodes nearest the root first",
    .tp_new = text_matcher_new,
    .tp_call = (ternaryfunc)text_matcher_call,
};

/* ----- ValueIndex: which predicates hold on a value (predicates.PredicateIndex.true_states) ----- */

/* A PredicateIndex's tables, tested in C: string (in)equality through its dicts (str ->
 * list of states), numbers parsed here (xpath_number; by the Python function for a
 * string that is not ASCII), numeric (in)equality through its dicts (float -> states),
 * ranges by binary search over sorted constants, and prefixes and infixes (starts-with,
 * contains) by a TextMatcher (or a Python function `text`), when there are any. */
typedef struct {
    double *keys;
    int32_t *states;
    Py_ssize_t count;
} Range;

enum { LT, LE, GT, GE, RANGES };

typedef struct {
    PyObject_HEAD
    int32_t limit;
    PyObject *string_eq, *string_ne, *number_eq, *number_ne, *text, *number;
    IntVec all_string_ne, all_number_ne; /* sorted */
    Range ranges[RANGES];
    int numeric;
} ValueIndex;

static PyTypeObject ValueIndexType;

static void value_index_dealloc(ValueIndex *v)
{
    Py_XDECREF(v->string_eq);
    Py_XDECREF(v->string_ne);
    Py_XDECREF(v->number_eq);
    Py_XDECREF(v->number_ne);
    Py_XDECREF(v->text);
    Py_XDECREF(v->number);
    PyMem_Free(v->all_string_ne.data);
    PyMem_Free(v->all_number_ne.data);
    for (int k = 0; k < RANGES; k++) {
        PyMem_Free(v->ranges[k].keys);
        PyMem_Free(v->ranges[k].states);
    }
    Py_TYPE(v)->tp_free((PyObject *)v);
}

/* A range: (keys, states), a sequence of floats in ascending order and one of states. */
static int load_range(ValueIndex *v, Range *range, PyObject *pair)
{
    PyObject *keys = NULL;
    IntVec items = {NULL, 0, 0};
    int ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 &&
             (keys = PySequence_Fast(PyTuple_GET_ITEM(pair, 0), "range keys")) != NULL &&
             read_ints(PyTuple_GET_ITEM(pair, 1), 0, v->limit, &items) == 0;
    Py_ssize_t n = ok ? PySequence_Fast_GET_SIZE(keys) : 0;
    if (ok && n != items.len)
        ok = 0;
    if (ok && !(range->keys = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(double))))
        ok = (PyErr_NoMemory(), 0);
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        range->keys[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(keys, i));
        ok = !PyErr_Occurred() && (i == 0 || range->keys[i - 1] <= range->keys[i]);
    }
    Py_XDECREF(keys);
    if (!ok) {
        PyMem_Free(items.data);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "ranges: {op: (ascending keys, states)}");
        return -1;
    }
    range->states = items.data;
    range->count = n;
    return 0;
}

static int sort_ints(IntVec *v, long limit)
{
    uint64_t *bits = bitmap_new(limit);
    if (bits == NULL)
        return PyErr_NoMemory(), -1;
    sort_unique(v, bits, limit);
    PyMem_Free(bits);
    return 0;
}

static PyObject *value_index_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"limit",     "string_eq", "string_ne", "all_string_ne",
                               "number_eq", "number_ne", "all_number_ne", "ranges",
                               "text",      "number",    NULL};
    int limit;
    PyObject *string_eq, *string_ne, *all_string_ne, *number_eq, *number_ne, *all_number_ne;
    PyObject *ranges, *text, *number;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO!O!OO!O!OO!OO", keywords, &limit,
                                     &PyDict_Type, &string_eq, &PyDict_Type, &string_ne,
                                     &all_string_ne, &PyDict_Type, &number_eq, &PyDict_Type,
                                     &number_ne, &all_number_ne, &PyDict_Type, &ranges, &text,
                                     &number))
        return NULL;
    ValueIndex *v = (ValueIndex *)type->tp_alloc(type, 0);
    if (v == NULL)
        return NULL;
    v->limit = limit;
    v->string_eq = Py_NewRef(string_eq);
    v->string_ne = Py_NewRef(string_ne);
    v->number_eq = Py_NewRef(number_eq);
    v->number_ne = Py_NewRef(number_ne);
    v->text = text == Py_None ? NULL : Py_NewRef(text);
    v->number = Py_NewRef(number);
    if (limit < 0 || read_ints(all_string_ne, 0, limit, &v->all_string_ne) < 0 ||
        read_ints(all_number_ne, 0, limit, &v->all_number_ne) < 0 ||
        sort_ints(&v->all_string_ne, limit) < 0 || sort_ints(&v->all_number_ne, limit) < 0)
        goto fail;
    static const char *ops[RANGES] = {[LT] = "<", [LE] = "<=", [GT] = ">", [GE] = ">="};
    for (int k = 0; k < RANGES; k++) {
        PyObject *pair = PyDict_GetItemString(ranges, ops[k]);
        if (pair != NULL && load_range(v, &v->ranges[k], pair) < 0)
            goto fail;
    }
    v->numeric = PyDict_GET_SIZE(number_eq) > 0 || v->all_number_ne.len > 0;
    for (int k = 0; k < RANGES; k++)
        v->numeric |= v->ranges[k].count > 0;
    return (PyObject *)v;
fail:
    Py_DECREF(v);
    return NULL;
}

/* XPath's number() of an ASCII string (predicates.xpath_number): optional white space, an
 * optional -, digits with an optional fraction or a fraction, optional white space;
 * anything else is NaN. White space is XML's: space, tab, CR, LF. 1 with the number
 * in *x, or 0 for a number too long for the buffer (Python parses it). */
static int ascii_number(const char *s, Py_ssize_t n, double *x)
{
    Py_ssize_t i = 0, start, end, digits = 0, fraction = 0;
#define SPACE(c) ((c) == ' ' || (c) == '\t' || (c) == '\r' || (c) == '\n')
    while (i < n && SPACE(s[i]))
        i++;
    start = i;
    if (i < n && s[i] == '-')
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, fraction++;
    }
    end = i;
    while (i < n && SPACE(s[i]))
        i++;
#undef SPACE
    *x = Py_NAN;
    if ((!digits && !fraction) || i != n)
        return 1;
    char buffer[64];
    if (end - start >= (Py_ssize_t)sizeof buffer)
        return 0;
    memcpy(buffer, s + start, (size_t)(end - start));
    buffer[end - start] = '\0';
    *x = PyOS_string_to_double(buffer, NULL, NULL); /* as float(): the same rounding */
    return 1;
}

/* Append the ints of a list of states (a value of one of the dicts) to out. */
static int append_list(PyObject *list, long limit, IntVec *out)
{
    return list == NULL ? (PyErr_Occurred() ? -1 : 0) : read_ints(list, 0, limit, out);
}

/* all - excluded (a list of states, or NULL): appended to out. */
static int append_all_but(const IntVec *all, PyObject *excluded, long limit, IntVec *out)
{
    IntVec skip = {NULL, 0, 0};
    if (excluded == NULL && PyErr_Occurred())
        return -1;
    if (excluded != NULL && read_ints(excluded, 0, limit, &skip) < 0) {
        PyMem_Free(skip.data);
        return -1;
    }
    int failed = vec_reserve(out, all->len) < 0;
    for (Py_ssize_t i = 0; !failed && i < all->len; i++) {
        int skipped = 0;
        for (Py_ssize_t j = 0; j < skip.len && !skipped; j++) /* few: a state's own constant */
            skipped = skip.data[j] == all->data[i];
        if (!skipped)
            out->data[out->len++] = all->data[i];
    }
    PyMem_Free(skip.data);
    return failed ? -1 : 0;
}

/* Python's bisect_right (right) or bisect_left of x in the range's keys. */
static Py_ssize_t bisect(const Range *r, double x, int right)
{
    Py_ssize_t low = 0, high = r->count;
    while (low < high) {
        Py_ssize_t mid = (low + high) / 2;
        if (right ? x < r->keys[mid] : !(r->keys[mid] < x))
            high = mid;
        else
            low = mid + 1;
    }
    return low;
}

/* The states whose predicate holds on value, appended to out (unsorted, may repeat). */
static int value_index_states(ValueIndex *v, PyObject *value, IntVec *out)
{
    if (append_list(PyDict_GetItemWithError(v->string_eq, value), v->limit, out) < 0)
        return -1;
    if (v->all_string_ne.len &&
        append_all_but(&v->all_string_ne, PyDict_GetItemWithError(v->string_ne, value), v->limit, out) < 0)
        return -1;
    if (v->numeric) {
        double x;
        if (!PyUnicode_IS_ASCII(value) ||
            !ascii_number((const char *)PyUnicode_DATA(value), PyUnicode_GET_LENGTH(value), &x)) {
            /* other digits and spaces (\d, \s), long numbers: Python parses it */
            PyObject *number = PyObject_CallOneArg(v->number, value);
            if (number == NULL)
                return -1;
            x = PyFloat_AsDouble(number);
            Py_DECREF(number);
            if (x == -1.0 && PyErr_Occurred())
                return -1;
        }
        PyObject *key = Py_IS_NAN(x) ? NULL : PyFloat_FromDouble(x);
        if (!Py_IS_NAN(x) && key == NULL)
            return -1;
        if (v->all_number_ne.len) {
            PyObject *excluded = key == NULL ? NULL : PyDict_GetItemWithError(v->number_ne, key);
            if (append_all_but(&v->all_number_ne, excluded, v->limit, out) < 0) {
                Py_XDECREF(key);
                return -1;
            }
        }
        if (key != NULL) {
            int failed = append_list(PyDict_GetItemWithError(v->number_eq, key), v->limit, out) < 0;
            Py_DECREF(key);
            if (failed)
                return -1;
            for (int k = 0; k < RANGES; k++) {
                const Range *r = &v->ranges[k];
                Py_ssize_t from = 0, to = r->count; /* < and <=: constants above x */
                if (k == LT)
                    from = bisect(r, x, 1);
                else if (k == LE)
                    from = bisect(r, x, 0);
                else if (k == GT)
                    to = bisect(r, x, 0);
                else
                    to = bisect(r, x, 1);
                if (to > from && vec_reserve(out, to - from) < 0)
                    return -1;
                for (Py_ssize_t i = from; i < to; i++)
                    out->data[out->len++] = r->states[i];
            }
        }
    }
    if (v->text != NULL && Py_IS_TYPE(v->text, &TextMatcherType))
        return tm_search((const TextMatcher *)v->text, value, out);
    if (v->text != NULL) {
        PyObject *found = PyObject_CallOneArg(v->text, value);
        int failed = found == NULL || read_ints(found, 0, v->limit, out) < 0;
        Py_XDECREF(found);
        if (failed)
            return -1;
    }
    return 0;
}

/* true_states(value) -> sorted list of the states whose predicate holds on value */
static PyObject *value_index_true_states(ValueIndex *v, PyObject *value)
{
    IntVec out = {NULL, 0, 0};
    PyObject *list = NULL;
    if (!PyUnicode_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "true_states: a str");
        return NULL;
    }
    if (value_index_states(v, value, &out) == 0 && sort_ints(&out, v->limit) == 0 &&
        (list = PyList_New(out.len)) != NULL)
        for (Py_ssize_t i = 0; i < out.len; i++)
            PyList_SET_ITEM(list, i, PyLong_FromLong(out.data[i]));
    PyMem_Free(out.data);
    return list;
}

static PyMethodDef value_index_methods[] = {
    {"true_states", (PyCFunction)value_index_true_states, METH_O,
     "true_states(value) -> sorted list of the states whose predicate holds on value"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ValueIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.ValueIndex",
    .tp_basicsize = sizeof(ValueIndex),
    .tp_dealloc = (destructor)value_index_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ValueIndex(limit, string_eq, string_ne, all_string_ne, number_eq, number_ne, "
              "all_number_ne, ranges, text, number): a PredicateIndex's tables tested in C "
              "(see PredicateIndex.value_index)",
    .tp_methods = value_index_methods,
    .tp_new = value_index_new,
};

/* ----- Tables ----- */

/* The machine's tables in C: open addressing over keys of four int32 (set ids and label
 * ids; unused positions 0; key[0], a set id, is -1 in an empty slot), each holding a pair
 * (a, b): a set id, or for leaf and close (popped, notes); a = NO_VALUES: no value is
 * tested there (the values table's False); a = BY_VALUE: the entries go by value, in
 * the dict side[b]. */
enum { PUSH_T, LEAF_T, CLOSE_T, ADD_T, VALUES_T, TABLES };
enum { NO_VALUES = -1, BY_VALUE = -2 };

typedef struct {
    int32_t key[4];
    int32_t a, b;
} Slot;

typedef struct {
    Slot *slots;
    Py_ssize_t count, cap; /* cap: a power of two */
} Table;

/* Hash of a table key (four int32; unused positions are 0). */
static inline uint64_t key_hash(const int32_t *k)
{
    uint64_t h = ((uint64_t)(uint32_t)k[0] << 32 | (uint32_t)k[1]) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    h += ((uint64_t)(uint32_t)k[2] << 32 | (uint32_t)k[3]) * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 32;
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 29);
}

/* The slot holding `key`, or the empty slot where it goes (key[0] < 0). The pointer
 * holds until the next insertion. */
static inline Slot *table_find(Table *t, const int32_t *key)
{
    size_t mask = (size_t)t->cap - 1, i = (size_t)key_hash(key) & mask;
    for (;; i = (i + 1) & mask) {
        Slot *s = &t->slots[i];
        if (s->key[0] < 0 || (s->key[0] == key[0] && s->key[1] == key[1] && s->key[2] == key[2] &&
                              s->key[3] == key[3]))
            return s;
    }
}

static void table_clear(Table *t)
{
    t->count = 0;
    for (Py_ssize_t i = 0; i < t->cap; i++)
        t->slots[i].key[0] = -1;
}

/* Room for one more entry (the table kept at most half full): 0, or -1 with an error. */
static int table_reserve(Table *t)
{
    if (2 * (t->count + 1) <= t->cap)
        return 0;
    Py_ssize_t cap = t->cap ? 2 * t->cap : 1024;
    Slot *old = t->slots, *slots = PyMem_Malloc((size_t)cap * sizeof(Slot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t old_cap = t->cap;
    t->slots = slots;
    t->cap = cap;
    table_clear(t);
    for (Py_ssize_t i = 0; i < old_cap; i++)
        if (old[i].key[0] >= 0) {
            *table_find(t, old[i].key) = old[i];
            t->count++;
        }
    PyMem_Free(old);
    return 0;
}

/* Store (a, b) under `key` (new or replaced): 0, or -1 with an error. */
static int table_put(Table *t, const int32_t *key, int32_t a, int32_t b)
{
    if (table_reserve(t) < 0)
        return -1;
    Slot *s = table_find(t, key);
    if (s->key[0] < 0) {
        memcpy(s->key, key, sizeof s->key);
        t->count++;
    }
    s->a = a;
    s->b = b;
    return 0;
}

/* ----- StateKernel ----- */

/* Lists of ints per state: the items of state s are items[at[s] .. at[s + 1]]. */
typedef struct {
    int32_t *at, *items;
} Lists;

/* A top-down state as eval needs it, built on first use: its enabled states as a bitmap
 * (bit s of byte s / 8, least significant first) and the TRUE leaves and NOT states
 * enabled there; `all` for the top-down state of a machine without top-down pruning. */
typedef struct {
    int ready, all;
    uint8_t *bits;
    int32_t *extras; /* ntrue TRUE leaves, then nnot NOT states */
    int32_t ntrue, nnot;
    ValueIndex *values; /* the predicates enabled there (set_values), or NULL */
} TopDown;

/* What eval, t_pop and t_add look at for a state, together (eval is bound by memory
 * latency: one cache line per state instead of one per array): its ε-successors
 * (eps.items[eps .. eps + neps)), its watchers (watch.items[...]), its back entries
 * (backs[back .. back + nback): the labels stepping into it), its kind, and whether it
 * is a TRUE leaf, proves filters as an early or an initial state, or has preconditions
 * (the order optimization). A *lazy* NOT is one nothing but the ANDs above it reads (no
 * watchers, no back entries, neither early nor initial, its predicate numbered below
 * it): eval does not decide it; an AND that needs it looks at its predicate then
 * (holds). Most NOTs of a subscription workload are so, and thousands are enabled at a
 * message's root: deciding each at every eval there cost a third of the matching. */
typedef struct {
    int32_t eps, neps, watch, nwatch, back, nback;
    uint8_t kind, true_leaf, early, initial, guarded, lazy;
} StateInfo;

/* A back table entry: the states back_items[at .. at + n) step into a state on `label`. */
typedef struct {
    int32_t label, at, n;
} BackEntry;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, nfilters;
    StateInfo *info;
    Lists eps, watch;     /* ε-successors; watchers (see XPushMachine._eval) */
    Lists early, initial; /* the filters (their ranks) an early / initial state proves */
    /* the order optimization: the precondition sets of a state (XPushMachine._add), as
     * set numbers; the states of each set */
    Lists prec, prec_sets;
    int has_prec;
    /* the back table, state -> {label: states stepping into it}, labels by id (from the
     * labels dict) */
    BackEntry *backs;
    int32_t *back_items;
    int32_t *step_label, *step_target; /* per state: the label it steps on (-1: none), into */
    PyObject *labels;
    int32_t star, attr_star; /* the label ids of * and @* (-1: nothing steps on them) */
    SetStore *states;
    TopDown *topdown; /* by id of the top-down state */
    Py_ssize_t topdown_count, held;
    Table tables[TABLES];     /* push, leaf, close, add, values (TableView) */
    PyObject *side;           /* a list: the dicts of entries by value */
    IntVec frames;            /* the walk's stack: (qt, qb) of each open element */
    PyObject *text_label;     /* "#text" */
    int32_t text_id;          /* its label id */
    IntVec all_extras; /* every TRUE leaf, then every NOT state */
    int32_t all_ntrue;
    uint8_t gen; /* stamps: bytes, to keep them in cache; cleared when gen wraps */
    uint8_t *matched, *decided, *seen;
    uint64_t *state_bits, *filter_bits; /* zeroed bitmaps for sort_unique */
    Queue queue;                  /* states to decide */
    IntVec list, up, found;       /* matched states, the parent's, proving */
} StateKernel;

static void free_topdown(StateKernel *self)
{
    for (Py_ssize_t k = 0; k < self->topdown_count; k++) {
        PyMem_Free(self->topdown[k].bits);
        PyMem_Free(self->topdown[k].extras);
        Py_XDECREF(self->topdown[k].values);
    }
    PyMem_Free(self->topdown);
    self->topdown = NULL;
    self->topdown_count = 0;
}

static void kernel_dealloc(StateKernel *self)
{
    Lists *lists[] = {&self->eps,  &self->watch,     &self->early,
                      &self->initial, &self->prec, &self->prec_sets};
    for (size_t k = 0; k < sizeof lists / sizeof *lists; k++) {
        PyMem_Free(lists[k]->at);
        PyMem_Free(lists[k]->items);
    }
    IntVec *vecs[] = {&self->all_extras, &self->list, &self->up, &self->found, &self->frames};
    for (size_t k = 0; k < sizeof vecs / sizeof *vecs; k++)
        PyMem_Free(vecs[k]->data);
    free_topdown(self);
    PyMem_Free(self->info);
    PyMem_Free(self->matched);
    PyMem_Free(self->decided);
    PyMem_Free(self->seen);
    PyMem_Free(self->state_bits);
    PyMem_Free(self->queue.bits);
    PyMem_Free(self->queue.summary);
    PyMem_Free(self->filter_bits);
    PyMem_Free(self->backs);
    PyMem_Free(self->back_items);
    PyMem_Free(self->step_label);
    PyMem_Free(self->step_target);
    for (int k = 0; k < TABLES; k++)
        PyMem_Free(self->tables[k].slots);
    Py_XDECREF(self->side);
    Py_XDECREF(self->text_label);
    Py_XDECREF(self->labels);
    Py_XDECREF(self->states);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A copy of a buffer of `count` items of `size` bytes, or NULL with an error. */
static void *copy_buffer(Py_buffer *buffer, Py_ssize_t count, Py_ssize_t size, const char *what)
{
    if (buffer->len != count * size) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", what, count * size,
                     buffer->len);
        return NULL;
    }
    void *out = PyMem_Malloc(count > 0 ? (size_t)(count * size) : 1);
    if (out == NULL)
        return PyErr_NoMemory();
    if (count)
        memcpy(out, buffer->buf, (size_t)(count * size));
    return out;
}

/* Load a pair (offsets, items) of int32 buffers for n lists (n < 0: as many as there are;
 * the number of lists is returned): offsets from 0, not
 * decreasing, items in [0, limit). The pair is taken apart here,
 * not by PyArg_ParseTupleAndKeywords: it sizes its list of buffers to release by the
 * top-level arguments, and nested buffer units overflowed it (found with AddressSanitizer). */
static int load_lists(Lists *lists, PyObject *pair, Py_ssize_t n, Py_ssize_t limit,
                      const char *what)
{
    Py_buffer at, items;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: a pair (offsets, items) of int32 arrays", what);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(pair, 0), &at, PyBUF_SIMPLE) < 0)
        return -1;
    if (n < 0) /* as many lists as the offsets give */
        n = at.len >= 4 ? at.len / 4 - 1 : 0;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(pair, 1), &items, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&at);
        return -1;
    }
    Py_ssize_t count = items.len / 4;
    int ok = (lists->at = copy_buffer(&at, n + 1, 4, what)) != NULL &&
             (lists->items = copy_buffer(&items, count, 4, what)) != NULL;
    PyBuffer_Release(&at);
    PyBuffer_Release(&items);
    if (!ok)
        return -1;
    ok = lists->at[0] == 0 && lists->at[n] == count;
    for (Py_ssize_t s = 0; s < n && ok; s++)
        ok = lists->at[s + 1] >= lists->at[s];
    for (Py_ssize_t i = 0; i < count && ok; i++)
        ok = lists->items[i] >= 0 && lists->items[i] < limit;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: bad offsets or items", what);
        return -1;
    }
    return n;
}

/* The id of a label (added when new), or -1 with an error. */
static int32_t label_id(StateKernel *self, PyObject *label, int add)
{
    PyObject *found = PyDict_GetItemWithError(self->labels, label);
    if (found != NULL)
        return (int32_t)PyLong_AsLong(found);
    if (PyErr_Occurred() || !add)
        return -1;
    PyObject *id = PyLong_FromSsize_t(PyDict_GET_SIZE(self->labels));
    if (id == NULL || PyDict_SetItem(self->labels, label, id) < 0) {
        Py_XDECREF(id);
        return -1;
    }
    Py_DECREF(id);
    return (int32_t)(PyDict_GET_SIZE(self->labels) - 1);
}

static int by_label_then_state(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The back table, from each state's step (`labels[t]`: its label or None; `targets[t]`:
 * the state it steps into): for each state, the states stepping into it, one entry per
 * label (entries by label id, each entry's states ascending). Built by a counting sort on
 * the target, so a workload of millions of states needs no dict per state. */
static int load_back(StateKernel *self, PyObject *labels, PyObject *targets)
{
    Py_ssize_t n = self->n;
    if (!PyList_Check(labels) || !PyList_Check(targets) || PyList_GET_SIZE(labels) != n ||
        PyList_GET_SIZE(targets) != n) {
        PyErr_SetString(PyExc_ValueError, "steps: (labels, targets), two lists of one per state");
        return -1;
    }
    if (!(self->labels = PyDict_New()))
        return -1;
    self->step_label = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    self->step_target = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    int32_t *at = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    int64_t *keys = NULL;
    int status = -1;
    if (!self->step_label || !self->step_target || !at) {
        PyErr_NoMemory();
        goto done;
    }
    memset(self->step_label, 0xFF, (size_t)n * sizeof(int32_t));
    Py_ssize_t steps = 0;
    for (Py_ssize_t t = 0; t < n; t++) {
        PyObject *label = PyList_GET_ITEM(labels, t), *target = PyList_GET_ITEM(targets, t);
        if (label == Py_None)
            continue;
        if (!PyUnicode_Check(label)) {
            PyErr_SetString(PyExc_TypeError, "steps: a label is a str or None");
            goto done;
        }
        Py_ssize_t s = index_of(target, n, PyExc_ValueError, "state");
        if (s < 0 || (self->step_label[t] = label_id(self, label, 1)) < 0)
            goto done;
        self->step_target[t] = (int32_t)s;
        at[s + 1]++;
        steps++;
    }
    for (Py_ssize_t s = 0; s < n; s++)
        at[s + 1] += at[s];
    self->back_items = PyMem_Malloc((size_t)(steps ? steps : 1) * sizeof(int32_t));
    keys = PyMem_Malloc((size_t)(steps ? steps : 1) * sizeof(int64_t));
    if (!self->back_items || !keys) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < n; t++) /* by target, then label, then state */
        if (self->step_label[t] >= 0)
            keys[at[self->step_target[t]]++] = (int64_t)self->step_label[t] << 32 | t;
    for (Py_ssize_t s = n; s > 0; s--) /* (the fill moved each start to the next one's) */
        at[s] = at[s - 1];
    at[0] = 0;
    Py_ssize_t entries = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        if (at[s + 1] - at[s] > 1)
            qsort(keys + at[s], (size_t)(at[s + 1] - at[s]), sizeof(int64_t), by_label_then_state);
        for (int32_t k = at[s]; k < at[s + 1]; k++)
            entries += k == at[s] || keys[k] >> 32 != keys[k - 1] >> 32;
    }
    self->backs = PyMem_Malloc((size_t)(entries ? entries : 1) * sizeof(BackEntry));
    if (!self->backs) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t e = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        self->info[s].back = e;
        for (int32_t k = at[s]; k < at[s + 1]; k++) {
            if (k == at[s] || keys[k] >> 32 != keys[k - 1] >> 32) {
                self->backs[e].label = (int32_t)(keys[k] >> 32);
                self->backs[e].at = k;
                self->backs[e].n = 0;
                e++;
            }
            self->backs[e - 1].n++;
            self->back_items[k] = (int32_t)(keys[k] & 0xFFFFFFFF);
        }
        self->info[s].nback = e - self->info[s].back;
    }
    status = 0;
done:
    PyMem_Free(at);
    PyMem_Free(keys);
    return status;
}

static PyObject *kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"kind",    "true_leaves", "eps",   "watchers", "early",
                               "initial", "filters",     "steps", "prec",     NULL};
    Py_buffer kind, trues;
    Py_ssize_t filters;
    PyObject *eps, *watchers, *early, *initial, *steps, *prec = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*OOOOnO!|O", keywords, &kind, &trues,
                                     &eps, &watchers, &early, &initial, &filters, &PyTuple_Type,
                                     &steps, &prec))
        return NULL;
    StateKernel *self = (StateKernel *)type->tp_alloc(type, 0);
    Py_ssize_t n = kind.len;
    if (self == NULL)
        goto done;
    self->n = n;
    self->nfilters = filters;
    if (PyTuple_GET_SIZE(steps) != 2 || n >= INT32_MAX || filters < 0 || filters >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "steps: (labels, targets); fewer than 2**31 states");
        goto fail;
    }
    if (load_lists(&self->eps, eps, n, n, "eps") < 0 ||
        load_lists(&self->watch, watchers, n, n, "watchers") < 0 ||
        load_lists(&self->early, early, n, filters, "early") < 0 ||
        load_lists(&self->initial, initial, n, filters, "initial") < 0)
        goto fail;
    if (!(self->info = PyMem_Calloc(n ? (size_t)n : 1, sizeof(StateInfo))))
        goto nomemory;
    if (load_back(self, PyTuple_GET_ITEM(steps, 0), PyTuple_GET_ITEM(steps, 1)) < 0)
        goto fail;
    if (prec != Py_None) {
        if (!PyTuple_Check(prec) || PyTuple_GET_SIZE(prec) != 2) {
            PyErr_SetString(PyExc_TypeError, "prec: None or a pair (sets per state, states per set)");
            goto fail;
        }
        Py_ssize_t sets = load_lists(&self->prec_sets, PyTuple_GET_ITEM(prec, 1), -1, n, "prec sets");
        if (sets < 0 || load_lists(&self->prec, PyTuple_GET_ITEM(prec, 0), n, sets, "prec") < 0)
            goto fail;
        self->has_prec = 1;
    }
    const uint8_t *kinds = kind.buf;
    for (Py_ssize_t s = 0; s < n; s++) {
        StateInfo *info = &self->info[s];
        info->kind = kinds[s];
        info->eps = self->eps.at[s];
        info->neps = self->eps.at[s + 1] - self->eps.at[s];
        info->watch = self->watch.at[s];
        info->nwatch = self->watch.at[s + 1] - self->watch.at[s];
        info->early = self->early.at[s + 1] > self->early.at[s];
        info->initial = self->initial.at[s + 1] > self->initial.at[s];
        info->guarded = self->has_prec && self->prec.at[s + 1] > self->prec.at[s];
        info->lazy = info->kind == NOT && info->nwatch == 0 && info->nback == 0 && !info->early &&
                     !info->initial && !info->guarded && info->neps == 1 &&
                     self->eps.items[info->eps] < s;
        if (info->kind > NOT || (info->kind == NOT && info->neps == 0)) {
            PyErr_SetString(PyExc_ValueError, "kind: OR, AND or NOT (with a successor)");
            goto fail;
        }
    }
    Py_ssize_t true_count;
    const int32_t *true_states = trues.buf;
    if (trues.len % 4) {
        PyErr_SetString(PyExc_ValueError, "true_leaves: int32 items expected");
        goto fail;
    }
    true_count = trues.len / 4;
    for (Py_ssize_t i = 0; i < true_count; i++) {
        if (true_states[i] < 0 || true_states[i] >= n) {
            PyErr_Format(PyExc_ValueError, "true_leaves: state %d out of range", true_states[i]);
            goto fail;
        }
        self->info[true_states[i]].true_leaf = 1;
    }
    for (int32_t s = 0; s < n; s++)
        if (self->info[s].true_leaf && vec_push(&self->all_extras, s) < 0)
            goto fail;
    self->all_ntrue = (int32_t)self->all_extras.len;
    for (int32_t s = 0; s < n; s++)
        if (self->info[s].kind == NOT && !self->info[s].lazy && vec_push(&self->all_extras, s) < 0)
            goto fail;
    uint8_t **stamps[] = {&self->matched, &self->decided, &self->seen};
    for (size_t k = 0; k < sizeof stamps / sizeof *stamps; k++)
        if (!(*stamps[k] = PyMem_Calloc(n ? (size_t)n : 1, 1)))
            goto nomemory;
    if (!(self->state_bits = bitmap_new(n)) ||
        !(self->queue.bits = PyMem_Calloc((size_t)n / 64 + 2, sizeof(uint64_t))) ||
        !(self->queue.summary = PyMem_Calloc((size_t)n / 4096 + 2, sizeof(uint64_t))) ||
        !(self->filter_bits = bitmap_new(filters)))
        goto nomemory;
    PyObject *star = PyUnicode_FromString("*"), *attr_star = PyUnicode_FromString("@*");
    if (star == NULL || attr_star == NULL) {
        Py_XDECREF(star);
        Py_XDECREF(attr_star);
        goto fail;
    }
    self->star = label_id(self, star, 0);
    self->attr_star = label_id(self, attr_star, 0);
    Py_DECREF(star);
    Py_DECREF(attr_star);
    if (PyErr_Occurred() || !(self->states = store_new((int32_t)n)) ||
        !(self->side = PyList_New(0)) || !(self->text_label = PyUnicode_FromString("#text")) ||
        (self->text_id = label_id(self, self->text_label, 1)) < 0)
        goto fail;
    for (int k = 0; k < TABLES; k++)
        if (table_reserve(&self->tables[k]) < 0)
            goto fail;
    goto done;
nomemory:
    PyErr_NoMemory();
fail:
    Py_CLEAR(self);
done:
    PyBuffer_Release(&kind);
    PyBuffer_Release(&trues);
    return (PyObject *)self;
}

/* A fresh generation for the stamp arrays (cleared when the counter wraps). */
static void next_generation(StateKernel *self)
{
    if (++self->gen == 0) {
        size_t bytes = (size_t)self->n;
        memset(self->matched, 0, bytes);
        memset(self->decided, 0, bytes);
        memset(self->seen, 0, bytes);
        self->gen = 1;
    }
}

static inline int has(const uint8_t *bits, int32_t s)
{
    return bits == NULL || (bits[s >> 3] >> (s & 7)) & 1;
}

/* The top-down state with id qt as eval needs it (built on first use), or NULL with an
 * error. The pointer holds until the next call. */
static TopDown *topdown_of(StateKernel *self, Py_ssize_t qt)
{
    if (qt < 0 || qt >= self->states->count) {
        PyErr_Format(PyExc_IndexError, "no interned set %zd", qt);
        return NULL;
    }
    if (qt >= self->topdown_count) {
        Py_ssize_t count = self->states->count + 64;
        TopDown *grown = PyMem_Realloc(self->topdown, (size_t)count * sizeof(TopDown));
        if (grown == NULL)
            return PyErr_NoMemory(), NULL;
        memset(grown + self->topdown_count, 0, (size_t)(count - self->topdown_count) * sizeof(TopDown));
        self->topdown = grown;
        self->topdown_count = count;
    }
    TopDown *td = &self->topdown[qt];
    if (td->ready)
        return td;
    Py_ssize_t count;
    const int32_t *x = store_items(self->states, qt, &count);
    if (count && x[0] == -1) {
        td->all = td->ready = 1;
        return td;
    }
    size_t bytes = ((size_t)self->n + 7) / 8;
    int32_t ntrue = 0, nnot = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        ntrue += self->info[x[i]].true_leaf;
        nnot += self->info[x[i]].kind == NOT && !self->info[x[i]].lazy;
    }
    if (!(td->bits = PyMem_Calloc(bytes ? bytes : 1, 1)) ||
        !(td->extras = PyMem_Malloc((size_t)(ntrue + nnot + 1) * sizeof(int32_t))))
        return PyErr_NoMemory(), NULL;
    td->ntrue = td->nnot = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        td->bits[x[i] >> 3] |= (uint8_t)(1 << (x[i] & 7));
        if (self->info[x[i]].true_leaf)
            td->extras[td->ntrue++] = x[i];
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (self->info[x[i]].kind == NOT && !self->info[x[i]].lazy)
            td->extras[td->ntrue + td->nnot++] = x[i];
    td->ready = 1;
    self->held += (Py_ssize_t)(bytes / 8); /* counted like entries of 8 bytes */
    return td;
}

static void eval_begin(StateKernel *self)
{
    next_generation(self);
    self->list.len = 0;
}

/* Add states (from a store: no -1 but the "all" marker, skipped) to eval's base. */
static int eval_base(StateKernel *self, const int32_t *x, Py_ssize_t count)
{
    uint8_t gen = self->gen, *matched = self->matched;
    for (Py_ssize_t i = 0; i < count; i++)
        if (x[i] >= 0 && matched[x[i]] != gen) {
            matched[x[i]] = gen;
            if (vec_push(&self->list, x[i]) < 0)
                return -1;
        }
    return 0;
}

/* Add a base given as an interned set's id or as an iterable of states. */
static int eval_base_object(StateKernel *self, PyObject *base)
{
    if (PyLong_Check(base)) {
        Py_ssize_t k = store_id(self->states, base), count;
        if (k < 0)
            return -1;
        const int32_t *x = store_items(self->states, k, &count);
        return eval_base(self, x, count);
    }
    IntVec states = {NULL, 0, 0};
    int ok = read_ints(base, 0, self->n, &states) == 0 && eval_base(self, states.data, states.len) == 0;
    PyMem_Free(states.data);
    return ok ? 0 : -1;
}

/* Whether state t matched in this eval: a lazy NOT (StateInfo), which eval does not
 * decide, holds where it is enabled and its predicate (decided: numbered below it) did
 * not match. */
static inline int holds(const StateKernel *self, int32_t t, const uint8_t *enabled, uint8_t gen)
{
    if (self->matched[t] == gen)
        return 1;
    const StateInfo *info = &self->info[t];
    return info->lazy && has(enabled, t) && self->matched[self->eps.items[info->eps]] != gen;
}

static inline void queue_watchers(StateKernel *self, int32_t s)
{
    const int32_t *w = self->watch.items + self->info[s].watch;
    for (int32_t i = 0; i < self->info[s].nwatch; i++)
        queue_put(&self->queue, w[i]);
}

/* eval(q) at a node with top-down state td, over the base added since eval_begin: the
 * matched states in self->list, in the order of XPushMachine._eval's decisions. */
static int eval_run(StateKernel *self, TopDown *td)
{
    const uint8_t *enabled = td->all ? NULL : td->bits;
    const int32_t *extras = td->all ? self->all_extras.data : td->extras;
    int32_t ntrue = td->all ? self->all_ntrue : td->ntrue;
    int32_t nnot = td->all ? (int32_t)self->all_extras.len - self->all_ntrue : td->nnot;
    uint8_t gen = self->gen, *matched = self->matched, *decided = self->decided;
    Queue *queue = &self->queue;
    if (eval_base(self, extras, ntrue) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < self->list.len; i++)
        queue_watchers(self, self->list.data[i]);
    for (int32_t i = 0; i < nnot; i++)
        queue_put(queue, extras[ntrue + i]);
    while (queue->count) {
        int32_t s = queue_take(queue);
        if (decided[s] == gen || matched[s] == gen)
            continue;
        decided[s] = gen;
        if (!has(enabled, s))
            continue;
        const StateInfo *info = &self->info[s];
        const int32_t *first = self->eps.items + info->eps, *end = first + info->neps;
        int ok;
        if (info->kind == AND) {
            ok = 1;
            for (const int32_t *t = first; t < end && ok; t++)
                ok = holds(self, *t, enabled, gen);
        } else if (info->kind == OR) {
            ok = 0;
            for (const int32_t *t = first; t < end && !ok; t++)
                ok = matched[*t] == gen;
        } else {
            ok = matched[*first] != gen;
        }
        if (ok) {
            matched[s] = gen;
            if (vec_push(&self->list, s) < 0) {
                while (queue->count) /* left empty for the next call */
                    queue_take(queue);
                return -1;
            }
            queue_watchers(self, s);
        }
    }
    return 0;
}

/* Append the items of state s in `lists` to `out`. */
static int append_items(Lists *lists, int32_t s, IntVec *out)
{
    int32_t count = lists->at[s + 1] - lists->at[s];
    if (count == 0 || vec_reserve(out, count) < 0)
        return count == 0 ? 0 : -1;
    const int32_t *items = lists->items + lists->at[s];
    for (int32_t i = 0; i < count; i++) /* mostly one or two: no memcpy call */
        out->data[out->len++] = items[i];
    return 0;
}

/* Add the states of back table entry e to self->up (those enabled at the parent). */
static int step_up(StateKernel *self, int32_t e, const uint8_t *parent_enabled)
{
    uint8_t gen = self->gen;
    const int32_t *items = self->back_items + self->backs[e].at;
    for (int32_t i = 0; i < self->backs[e].n; i++) {
        int32_t t = items[i];
        if (!has(parent_enabled, t) || self->seen[t] == gen)
            continue;
        self->seen[t] = gen;
        if (vec_push(&self->up, t) < 0)
            return -1;
    }
    return 0;
}

/* The label ids a node's label steps on: its own (exact) and the wildcard's that matches
 * it (loose: * for elements, @* for attributes, none for text); -1 where no state steps
 * on a label. 0, or -1 with an error. */
static int step_labels(StateKernel *self, PyObject *label, int32_t *exact, int32_t *loose)
{
    *exact = label_id(self, label, 0);
    if (*exact < 0 && PyErr_Occurred())
        return -1;
    Py_UCS4 first = PyUnicode_GET_LENGTH(label) ? PyUnicode_READ_CHAR(label, 0) : '#';
    *loose = first == '@' ? self->attr_star : first == '#' ? -1 : self->star;
    return 0;
}

/* eval at a node with top-down state qt (over the base added since eval_begin), then
 * t_pop to its parent over the node's label ids (step_labels): the ids of the parent's
 * new states and of the early states matched. */
static int eval_pop(StateKernel *self, Py_ssize_t qt, int32_t exact, int32_t loose,
                    Py_ssize_t parent_qt, Py_ssize_t *up_id, Py_ssize_t *proven_id)
{
    TopDown *td = topdown_of(self, qt);
    if (td == NULL || eval_run(self, td) < 0 || (td = topdown_of(self, parent_qt)) == NULL)
        return -1;
    const uint8_t *parent_enabled = td->all ? NULL : td->bits;
    self->up.len = 0;
    self->found.len = 0;
    for (Py_ssize_t i = 0; i < self->list.len; i++) {
        int32_t s = self->list.data[i];
        const StateInfo *info = &self->info[s];
        if (info->early) { /* an early state: proves, goes no higher */
            if (vec_push(&self->found, s) < 0)
                return -1;
            continue;
        }
        for (int32_t e = info->back; e < info->back + info->nback; e++)
            if ((self->backs[e].label == exact || self->backs[e].label == loose) &&
                step_up(self, e, parent_enabled) < 0)
                return -1;
    }
    sort_unique(&self->up, self->state_bits, self->n);
    sort_unique(&self->found, self->state_bits, self->n);
    /* in the order of XPushMachine._pop: the proven states first */
    if ((*proven_id = store_intern(self->states, self->found.data, self->found.len)) < 0 ||
        (*up_id = store_intern(self->states, self->up.data, self->up.len)) < 0)
        return -1;
    return 0;
}

/* t_push: the top-down state of a child with label ids (exact, loose) (step_labels) of a
 * node with top-down state qt: the ε-closure of the targets of qt's states stepping on
 * them; "all" stays "all" (no top-down pruning). Its id, or -1 with an error. */
static Py_ssize_t push_states(StateKernel *self, Py_ssize_t qt, int32_t exact, int32_t loose)
{
    Py_ssize_t count;
    const int32_t *x = store_items(self->states, qt, &count);
    if (count && x[0] == -1)
        return qt;
    next_generation(self);
    uint8_t gen = self->gen, *seen = self->seen;
    IntVec *out = &self->up;
    out->len = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t label = self->step_label[x[i]], t = self->step_target[x[i]];
        if (label >= 0 && (label == exact || label == loose) && seen[t] != gen) {
            seen[t] = gen;
            if (vec_push(out, t) < 0)
                return -1;
        }
    }
    for (Py_ssize_t j = 0; j < out->len; j++) { /* the ε-closure */
        const StateInfo *info = &self->info[out->data[j]];
        for (int32_t k = 0; k < info->neps; k++) {
            int32_t u = self->eps.items[info->eps + k];
            if (seen[u] != gen) {
                seen[u] = gen;
                if (vec_push(out, u) < 0)
                    return -1;
            }
        }
    }
    sort_unique(out, self->state_bits, self->n);
    return store_intern(self->states, out->data, out->len);
}

/* t_add^b: left | right, less the states of right the order optimization drops (those
 * with preconditions none of which left holds all of); the id of the result. */
static Py_ssize_t add_sets(StateKernel *self, Py_ssize_t left, Py_ssize_t right)
{
    Py_ssize_t nl, nr, i = 0, j = 0;
    const int32_t *l = store_items(self->states, left, &nl);
    const int32_t *r = store_items(self->states, right, &nr);
    uint8_t gen = 0;
    if (self->has_prec) {
        next_generation(self);
        gen = self->gen;
        for (Py_ssize_t k = 0; k < nl; k++)
            if (l[k] >= 0)
                self->matched[l[k]] = gen;
    }
    IntVec *out = &self->up;
    out->len = 0;
    while (i < nl || j < nr) {
        int32_t x;
        if (j == nr || (i < nl && l[i] < r[j]))
            x = l[i++];
        else if (i < nl && l[i] == r[j]) {
            x = l[i++];
            j++;
        } else {
            x = r[j++];
            if (x >= 0 && self->info[x].guarded) {
                int kept = 0; /* some precondition set all in left */
                for (int32_t g = self->prec.at[x]; g < self->prec.at[x + 1] && !kept; g++) {
                    int32_t set = self->prec.items[g];
                    kept = 1;
                    for (int32_t k = self->prec_sets.at[set]; k < self->prec_sets.at[set + 1] && kept; k++)
                        kept = self->matched[self->prec_sets.items[k]] == gen;
                }
                if (!kept)
                    continue;
            }
        }
        if (vec_push(out, x) < 0)
            return -1;
    }
    return store_intern(self->states, out->data, out->len);
}

/* At the document node: eval, then the initial and early states matched (they prove
 * their filters). */
static Py_ssize_t accept_states(StateKernel *self, Py_ssize_t qt)
{
    TopDown *td = topdown_of(self, qt);
    if (td == NULL || eval_run(self, td) < 0)
        return -1;
    self->found.len = 0;
    for (Py_ssize_t i = 0; i < self->list.len; i++) {
        int32_t s = self->list.data[i];
        if ((self->info[s].initial || self->info[s].early) &&
            vec_push(&self->found, s) < 0)
            return -1;
    }
    sort_unique(&self->found, self->state_bits, self->n);
    return store_intern(self->states, self->found.data, self->found.len);
}

/* Begin eval over a tuple of bases (interned sets' ids or iterables of states). */
static int eval_bases(StateKernel *self, PyObject *bases)
{
    eval_begin(self);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(bases); k++)
        if (eval_base_object(self, PyTuple_GET_ITEM(bases, k)) < 0)
            return -1;
    return 0;
}

static PyObject *kernel_eval_pop(StateKernel *self, PyObject *args)
{
    PyObject *bases, *label;
    Py_ssize_t qt, parent_qt, up, proven;
    int32_t exact, loose;
    if (!PyArg_ParseTuple(args, "O!nUn", &PyTuple_Type, &bases, &qt, &label, &parent_qt) ||
        step_labels(self, label, &exact, &loose) < 0 || eval_bases(self, bases) < 0 ||
        eval_pop(self, qt, exact, loose, parent_qt, &up, &proven) < 0)
        return NULL;
    return Py_BuildValue("(nn)", up, proven);
}

static PyObject *kernel_accept(StateKernel *self, PyObject *args)
{
    PyObject *bases;
    Py_ssize_t qt, found;
    if (!PyArg_ParseTuple(args, "O!n", &PyTuple_Type, &bases, &qt) || eval_bases(self, bases) < 0 ||
        (found = accept_states(self, qt)) < 0)
        return NULL;
    return PyLong_FromSsize_t(found);
}

/* An int argument as a set id. */
static int32_t arg_id(StateKernel *self, Py_ssize_t k)
{
    if (k < 0 || k >= self->states->count) {
        PyErr_Format(PyExc_IndexError, "interned set %zd out of range", k);
        return -1;
    }
    return (int32_t)k;
}

static PyObject *kernel_set_values(StateKernel *self, PyObject *args)
{
    Py_ssize_t qt;
    ValueIndex *index;
    TopDown *td;
    if (!PyArg_ParseTuple(args, "nO!", &qt, &ValueIndexType, &index) || !(td = topdown_of(self, qt)))
        return NULL;
    if (index->limit != self->n) {
        PyErr_SetString(PyExc_ValueError, "set_values: an index over another AFA");
        return NULL;
    }
    Py_XSETREF(td->values, (ValueIndex *)Py_NewRef(index));
    Py_RETURN_NONE;
}

static PyObject *kernel_push(StateKernel *self, PyObject *args)
{
    PyObject *label;
    Py_ssize_t qt, child;
    int32_t exact, loose;
    if (!PyArg_ParseTuple(args, "nU", &qt, &label) || step_labels(self, label, &exact, &loose) < 0)
        return NULL;
    if (arg_id(self, qt) < 0 || (child = push_states(self, qt, exact, loose)) < 0)
        return NULL;
    return PyLong_FromSsize_t(child);
}

static PyObject *kernel_add(StateKernel *self, PyObject *args)
{
    PyObject *left, *right;
    Py_ssize_t l, r, sum;
    if (!PyArg_ParseTuple(args, "OO", &left, &right) || (l = store_id(self->states, left)) < 0 ||
        (r = store_id(self->states, right)) < 0 || (sum = add_sets(self, l, r)) < 0)
        return NULL;
    return PyLong_FromSsize_t(sum);
}

/* Mark the items of state s in `lists` in `bits` (a bitmap of sort_unique's), with their
 * words in its summary `summary`; their number added to *count. */
static inline void mark_items(const Lists *lists, int32_t s, uint64_t *bits, uint64_t *summary,
                              Py_ssize_t *count)
{
    const int32_t *items = lists->items + lists->at[s], *stop = lists->items + lists->at[s + 1];
    *count += stop - items;
    for (; items < stop; items++) {
        int32_t w = *items >> 6;
        bits[w] |= (uint64_t)1 << (*items & 63);
        summary[w >> 6] |= (uint64_t)1 << (w & 63);
    }
}

/* The filters proven by a document's states: those found at the document node (initial
 * and early) and the early ones proven on the way (a tuple of sets), all interned sets.
 * Appended to self->found, or with `bits` set in self->filter_bits as sort_unique sets
 * them (their number, repeats counted, in *count); -1 with an error (nothing set). */
static int answer_filters(StateKernel *self, PyObject *found, PyObject *proven, int bits,
                          Py_ssize_t *count)
{
    for (Py_ssize_t k = -1; k < PyTuple_GET_SIZE(proven); k++)
        if (store_id(self->states, k < 0 ? found : PyTuple_GET_ITEM(proven, k)) < 0)
            return -1;
    next_generation(self); /* seen: early states already counted */
    self->found.len = 0;
    uint64_t *summary = self->filter_bits + bitmap_words(self->nfilters);
    for (Py_ssize_t k = -1; k < PyTuple_GET_SIZE(proven); k++) {
        Py_ssize_t n;
        const int32_t *x = store_items(
            self->states, store_id(self->states, k < 0 ? found : PyTuple_GET_ITEM(proven, k)), &n);
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i + 8 < n && x[i + 8] >= 0) { /* scattered: asked for ahead */
                __builtin_prefetch(&self->info[x[i + 8]]);
                __builtin_prefetch(&self->early.at[x[i + 8]]);
            }
            if (x[i] < 0 || self->seen[x[i]] == self->gen)
                continue;
            self->seen[x[i]] = self->gen;
            const StateInfo *info = &self->info[x[i]];
            if (bits) {
                if (k < 0 && info->initial)
                    mark_items(&self->initial, x[i], self->filter_bits, summary, count);
                if (info->early)
                    mark_items(&self->early, x[i], self->filter_bits, summary, count);
            } else if ((k < 0 && info->initial &&
                        append_items(&self->initial, x[i], &self->found) < 0) ||
                       (info->early && append_items(&self->early, x[i], &self->found) < 0)) {
                return -1;
            }
        }
    }
    return 0;
}

/* A document's answer (answer_filters): the ranks of its filters, sorted, as bytes of
 * native int32. */
static PyObject *kernel_answer(StateKernel *self, PyObject *args)
{
    PyObject *found, *proven;
    if (!PyArg_ParseTuple(args, "OO!", &found, &PyTuple_Type, &proven) ||
        answer_filters(self, found, proven, 0, NULL) < 0)
        return NULL;
    sort_unique(&self->found, self->filter_bits, self->nfilters);
    return PyBytes_FromStringAndSize((const char *)self->found.data,
                                     self->found.len * (Py_ssize_t)sizeof(int32_t));
}

/* A document's answer (answer_filters) with more ranks (int32 bytes, or None) as the text
 * of the JSON list of their ids (json_list's): the ranks go straight to a bitmap and are
 * written from it, with no list of them made or sorted. */
static PyObject *kernel_answer_json(StateKernel *self, PyObject *args)
{
    PyObject *found, *proven, *more_ranks = Py_None, *out = NULL;
    Py_buffer slots, texts, more = {0};
    int ascii;
    Py_ssize_t widest, count = 0;
    JsonIds ids;
    if (!PyArg_ParseTuple(args, "OO!y*y*pn|O", &found, &PyTuple_Type, &proven, &slots, &texts,
                          &ascii, &widest, &more_ranks))
        return NULL;
    if ((more_ranks != Py_None && PyObject_GetBuffer(more_ranks, &more, PyBUF_SIMPLE) < 0) ||
        json_ids_of(&slots, &texts, ascii, widest, &ids) < 0)
        goto done;
    const int32_t *extra = more.buf;
    Py_ssize_t count2 = more.len / 4;
    if (ids.n != self->nfilters || more.len % 4) {
        PyErr_Format(PyExc_ValueError, "answer_json: ids of %zd filters, ranks int32",
                     self->nfilters);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count2; i++)
        if (extra[i] < 0 || extra[i] >= ids.n) {
            PyErr_Format(PyExc_ValueError, "filter %d out of range", extra[i]);
            goto done;
        }
    if (answer_filters(self, found, proven, 1, &count) < 0)
        goto done;
    uint64_t *bits = self->filter_bits, *summary = bits + bitmap_words(self->nfilters);
    for (Py_ssize_t i = 0; i < count2; i++) {
        int32_t w = extra[i] >> 6;
        bits[w] |= (uint64_t)1 << (extra[i] & 63);
        summary[w >> 6] |= (uint64_t)1 << (w & 63);
    }
    out = json_from_bits(&ids, bits, count + count2);
done:
    PyBuffer_Release(&slots);
    PyBuffer_Release(&texts);
    if (more.obj != NULL)
        PyBuffer_Release(&more);
    return out;
}

/* ids_of(ranks, ids) -> a new list of the ids (a list, by rank) of the ranks (int32 bytes). */
static PyObject *kernel_ids_of(StateKernel *self, PyObject *args)
{
    Py_buffer ranks;
    PyObject *ids, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*O!", &ranks, &PyList_Type, &ids))
        return NULL;
    const int32_t *rank = ranks.buf;
    Py_ssize_t count = ranks.len / 4;
    if (PyList_GET_SIZE(ids) != self->nfilters || ranks.len % 4) {
        PyErr_Format(PyExc_ValueError, "ids: %zd filters expected, ranks: int32", self->nfilters);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (rank[i] < 0 || rank[i] >= self->nfilters) {
            PyErr_Format(PyExc_ValueError, "filter %d out of range", rank[i]);
            goto done;
        }
    out = PyList_New(count);
    PyObject **id = ((PyListObject *)ids)->ob_item;
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        if (i + 16 < count) /* the ids are scattered in memory: ask for them ahead */
            __builtin_prefetch(id[rank[i + 16]], 1);
        PyList_SET_ITEM(out, i, Py_NewRef(id[rank[i]]));
    }
done:
    PyBuffer_Release(&ranks);
    return out;
}

/* Forget every interned set and table entry (the machine's flush). */
static void clear_sets(StateKernel *self)
{
    store_clear(self->states);
    free_topdown(self);
    for (int k = 0; k < TABLES; k++)
        table_clear(&self->tables[k]);
    PyList_SetSlice(self->side, 0, PyList_GET_SIZE(self->side), NULL); /* cannot fail */
    self->held = 0;
}

/* A table of the kernel seen from Python: a mapping like the dict tables of the Python
 * machine (keys are tuples of set ids and labels; a table of one key item takes the item
 * itself). Its values are set ids (push, add), pairs of set ids (leaf, close), dicts of
 * entries by value (leaf, values) or False (values: no value is tested there). */
typedef struct {
    PyObject_HEAD
    StateKernel *kernel;
    int which;
} TableView;

static PyTypeObject TableViewType;

static const struct {
    const char *name;
    int width, label_at, pair;
} table_shapes[TABLES] = {
    [PUSH_T] = {"push", 2, 1, 0},  [LEAF_T] = {"leaf", 2, 1, 1},
    [CLOSE_T] = {"close", 4, 3, 1}, [ADD_T] = {"add", 2, -1, 0},
    [VALUES_T] = {"values", 1, -1, 0},
};

/* A Python key as four int32: 1, 0 when it names a label the kernel does not know (and
 * `add` is 0: nothing is stored under it), or -1 with an error. */
static int view_key(TableView *v, PyObject *key, int add, int32_t *out)
{
    int width = table_shapes[v->which].width, label_at = table_shapes[v->which].label_at;
    memset(out, 0, 4 * sizeof(int32_t));
    if (width > 1 && (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != width)) {
        PyErr_Format(PyExc_KeyError, "%s: a key is a tuple of %d items", table_shapes[v->which].name,
                     width);
        return -1;
    }
    for (int i = 0; i < width; i++) {
        PyObject *item = width > 1 ? PyTuple_GET_ITEM(key, i) : key;
        if (i == label_at) {
            if (!PyUnicode_Check(item)) {
                PyErr_SetString(PyExc_KeyError, "a label must be a str");
                return -1;
            }
            if ((out[i] = label_id(v->kernel, item, add)) < 0)
                return PyErr_Occurred() ? -1 : 0;
        } else {
            Py_ssize_t k = store_id(v->kernel->states, item);
            if (k < 0)
                return -1;
            out[i] = (int32_t)k;
        }
    }
    return 1;
}

/* An entry as a Python value (a new reference). */
static PyObject *entry_object(TableView *v, const Slot *s)
{
    if (s->a == BY_VALUE)
        return Py_NewRef(PyList_GET_ITEM(v->kernel->side, s->b));
    if (s->a == NO_VALUES)
        return Py_NewRef(Py_False);
    if (table_shapes[v->which].pair)
        return Py_BuildValue("(ii)", s->a, s->b);
    return PyLong_FromLong(s->a);
}

/* The entry under a Python key as a new reference; NULL with no error when missing. */
static PyObject *view_lookup(TableView *v, PyObject *key)
{
    int32_t k[4];
    int known = view_key(v, key, 0, k);
    if (known <= 0)
        return NULL;
    Slot *s = table_find(&v->kernel->tables[v->which], k);
    return s->key[0] < 0 ? NULL : entry_object(v, s);
}

static PyObject *view_subscript(TableView *v, PyObject *key)
{
    PyObject *entry = view_lookup(v, key);
    if (entry == NULL && !PyErr_Occurred())
        PyErr_SetObject(PyExc_KeyError, key);
    return entry;
}

static int view_assign(TableView *v, PyObject *key, PyObject *value)
{
    int32_t k[4], a, b = 0;
    StateKernel *kernel = v->kernel;
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "table entries are not deleted (flush forgets them all)");
        return -1;
    }
    if (view_key(v, key, 1, k) < 0)
        return -1;
    if (PyDict_Check(value)) {
        if (v->which != LEAF_T && v->which != VALUES_T) {
            PyErr_SetString(PyExc_TypeError, "only leaf and values entries go by value");
            return -1;
        }
        a = BY_VALUE;
        b = (int32_t)PyList_GET_SIZE(kernel->side);
        if (PyList_Append(kernel->side, value) < 0)
            return -1;
    } else if (value == Py_False && v->which == VALUES_T) {
        a = NO_VALUES;
    } else if (table_shapes[v->which].pair) {
        Py_ssize_t x, y;
        if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
            PyErr_Format(PyExc_TypeError, "%s: an entry is a pair of set ids",
                         table_shapes[v->which].name);
            return -1;
        }
        if ((x = store_id(kernel->states, PyTuple_GET_ITEM(value, 0))) < 0 ||
            (y = store_id(kernel->states, PyTuple_GET_ITEM(value, 1))) < 0)
            return -1;
        a = (int32_t)x;
        b = (int32_t)y;
    } else {
        Py_ssize_t x = store_id(kernel->states, value);
        if (x < 0)
            return -1;
        a = (int32_t)x;
    }
    return table_put(&kernel->tables[v->which], k, a, b);
}

/* get(key, default=None) */
static PyObject *view_get(TableView *v, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(key, default=None)");
        return NULL;
    }
    PyObject *entry = view_lookup(v, args[0]);
    if (entry != NULL || PyErr_Occurred())
        return entry;
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

/* setdefault(key, default): the entry, stored as default when missing */
static PyObject *view_setdefault(TableView *v, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "setdefault(key, default)");
        return NULL;
    }
    PyObject *entry = view_lookup(v, args[0]);
    if (entry != NULL || PyErr_Occurred())
        return entry;
    if (view_assign(v, args[0], args[1]) < 0)
        return NULL;
    return Py_NewRef(args[1]);
}

static int view_contains(TableView *v, PyObject *key)
{
    PyObject *entry = view_lookup(v, key);
    Py_XDECREF(entry);
    return entry != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
}

static Py_ssize_t view_length(TableView *v)
{
    return v->kernel->tables[v->which].count;
}

static void view_dealloc(TableView *v)
{
    Py_DECREF(v->kernel);
    PyObject_Free(v);
}

static PyMethodDef view_methods[] = {
    {"get", (PyCFunction)(void (*)(void))view_get, METH_FASTCALL,
     "get(key, default=None): the entry under key"},
    {"setdefault", (PyCFunction)(void (*)(void))view_setdefault, METH_FASTCALL,
     "setdefault(key, default): the entry under key, stored as default when missing"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods view_mapping = {
    .mp_length = (lenfunc)view_length,
    .mp_subscript = (binaryfunc)view_subscript,
    .mp_ass_subscript = (objobjargproc)view_assign,
};

static PySequenceMethods view_sequence = {
    .sq_contains = (objobjproc)view_contains,
};

static PyTypeObject TableViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.Table",
    .tp_basicsize = sizeof(TableView),
    .tp_dealloc = (destructor)view_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One of a StateKernel's tables, as a mapping (get, setdefault, [], in, len)",
    .tp_methods = view_methods,
    .tp_as_mapping = &view_mapping,
    .tp_as_sequence = &view_sequence,
};

/* table(name) -> the kernel's table of that name (push, leaf, close, add, values) */
static PyObject *kernel_table(StateKernel *self, PyObject *name)
{
    for (int k = 0; k < TABLES; k++)
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, table_shapes[k].name) == 0) {
            TableView *v = PyObject_New(TableView, &TableViewType);
            if (v == NULL)
                return NULL;
            v->kernel = (StateKernel *)Py_NewRef(self);
            v->which = k;
            return (PyObject *)v;
        }
    PyErr_Format(PyExc_KeyError, "no table %R", name);
    return NULL;
}

/* label_ids(labels) -> list: the ids of labels (added when new), the keys of the tables */
static PyObject *kernel_label_ids(StateKernel *self, PyObject *labels)
{
    PyObject *seq = PySequence_Fast(labels, "label_ids: a sequence of str"), *out = NULL;
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((out = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *label = PySequence_Fast_GET_ITEM(seq, i), *id;
        int32_t k;
        if (!PyUnicode_Check(label)) {
            PyErr_SetString(PyExc_TypeError, "label_ids: a sequence of str");
            Py_CLEAR(out);
            goto done;
        }
        if ((k = label_id(self, label, 1)) < 0 || (id = PyLong_FromLong(k)) == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, id);
    }
done:
    Py_DECREF(seq);
    return out;
}

/* ----- The table walk ----- */

/* The pair of ints of a Python entry (popped, notes), checked to be set ids. */
static int entry_pair(StateKernel *self, PyObject *entry, int32_t *a, int32_t *b)
{
    Py_ssize_t x, y;
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "a table entry must be (popped, notes)");
        return -1;
    }
    if ((x = store_id(self->states, PyTuple_GET_ITEM(entry, 0))) < 0 ||
        (y = store_id(self->states, PyTuple_GET_ITEM(entry, 1))) < 0)
        return -1;
    *a = (int32_t)x;
    *b = (int32_t)y;
    return 0;
}

/* A set id given as a new reference (taken) to an int, checked: a miss's result. */
static int32_t miss_id(StateKernel *self, PyObject *result)
{
    if (result == NULL)
        return -1;
    Py_ssize_t k = store_id(self->states, result);
    Py_DECREF(result);
    return (int32_t)k;
}

/* The by-value entry `value` of side dict k, or NULL (no error) when missing. */
static PyObject *by_value(StateKernel *self, int32_t k, PyObject *value)
{
    if (value == Py_None)
        return NULL;
    return PyDict_GetItemWithError(PyList_GET_ITEM(self->side, k), value);
}

/* t_add^b(left, right) from the add table, computed and stored when missing; adding
 * the empty set is the identity and needs no entry. */
static int32_t add_entry(StateKernel *self, int32_t left, int32_t right, int32_t empty,
                         Py_ssize_t *computed)
{
    if (right == empty)
        return left;
    int32_t key[4] = {left, right, 0, 0};
    Slot *s = table_find(&self->tables[ADD_T], key);
    if (s->key[0] >= 0)
        return s->a;
    Py_ssize_t sum = add_sets(self, left, right);
    if (sum < 0 || table_put(&self->tables[ADD_T], key, (int32_t)sum, 0) < 0)
        return -1;
    ++*computed;
    return (int32_t)sum;
}

/* The value index at top-down state qt (set_values), or NULL: none, or an error. */
static ValueIndex *values_at(StateKernel *self, int32_t qt)
{
    TopDown *td = topdown_of(self, qt);
    return td == NULL ? NULL : td->values;
}

/* A missing element value (XPushMachine._element_values) at a node with value index
 * `index`: the id of the set of states true on text, stored in side dict k. */
static int32_t element_values(StateKernel *self, ValueIndex *index, int32_t k, PyObject *text)
{
    IntVec *found = &self->found;
    found->len = 0;
    if (value_index_states(index, text, found) < 0)
        return -1;
    sort_unique(found, self->state_bits, self->n);
    Py_ssize_t id = store_intern(self->states, found->data, found->len);
    PyObject *entry = id < 0 ? NULL : PyLong_FromSsize_t(id);
    int failed = entry == NULL || PyDict_SetItem(PyList_GET_ITEM(self->side, k), text, entry) < 0;
    Py_XDECREF(entry);
    self->held += !failed; /* one entry, as the Python machine counts it */
    return failed ? -1 : (int32_t)id;
}

/* A missing leaf entry by value (XPushMachine._leaf) of an attribute or text child (top-down
 * state child, value index `index`, label ids lid and loose) of a node with top-down state
 * qt: eval over the states true on value, then t_pop; (popped, notes), stored in side
 * dict k. 0, or -1 with an error. */
static int leaf_values(StateKernel *self, ValueIndex *index, int32_t k, int32_t child,
                       int32_t lid, int32_t loose, int32_t qt, PyObject *value, int32_t *popped,
                       int32_t *notes)
{
    IntVec *found = &self->found;
    Py_ssize_t up, proven;
    found->len = 0;
    if (value_index_states(index, value, found) < 0)
        return -1;
    eval_begin(self);
    if (eval_base(self, found->data, found->len) < 0 ||
        eval_pop(self, child, lid, loose, qt, &up, &proven) < 0)
        return -1;
    PyObject *entry = Py_BuildValue("(nn)", up, proven);
    int failed = entry == NULL || PyDict_SetItem(PyList_GET_ITEM(self->side, k), value, entry) < 0;
    Py_XDECREF(entry);
    if (failed)
        return -1;
    self->held++;
    *popped = (int32_t)up;
    *notes = (int32_t)proven;
    return 0;
}

/* Append notes (the id of a set of early states matched) to the document's proven list. */
static int note(PyObject *proven, int32_t notes)
{
    PyObject *id = PyLong_FromLong(notes);
    int failed = id == NULL || PyList_Append(proven, id) < 0;
    Py_XDECREF(id);
    return failed ? -1 : 0;
}

static PyObject *kernel_walk(StateKernel *self, PyObject *args)
{
    Py_buffer docs, kinds, names, elem_ids, attr_ids;
    PyObject *values, *elem_labels, *attr_labels, *texts, *proven;
    PyObject *leaf_miss, *values_miss;
    long long doc;
    Py_ssize_t i, n, computed = 0, qt_arg, qb_arg, empty_arg;
    int start;
    if (!PyArg_ParseTuple(args, "y*y*y*O!LnnO!O!y*y*OnO!nnp(OO):walk", &docs, &kinds, &names,
                          &PyList_Type, &values, &doc, &i, &n, &PyList_Type, &elem_labels,
                          &PyList_Type, &attr_labels, &elem_ids, &attr_ids, &texts, &empty_arg,
                          &PyList_Type, &proven, &qt_arg, &qb_arg, &start, &leaf_miss,
                          &values_miss))
        return NULL;
    /* element values: texts is the list of text parts of each open element; None when no
     * filter compares one */
    int with_values = texts != Py_None;
    PyObject *result = NULL;
    const long long *doc_of = docs.buf;
    const unsigned char *kind_of = kinds.buf;
    const int *name_of = names.buf;
    const int32_t *elem_id = elem_ids.buf, *attr_id = attr_ids.buf;
    Py_ssize_t count = kinds.len, elems = PyList_GET_SIZE(elem_labels);
    Py_ssize_t attrs = PyList_GET_SIZE(attr_labels);
    int32_t qt, qb, empty;
    IntVec *frames = &self->frames;
    if (with_values && !PyList_Check(texts)) {
        PyErr_SetString(PyExc_TypeError, "texts must be a list or None");
        goto out;
    }
    if (docs.itemsize != 8 || names.itemsize != 4 || docs.len / 8 != count ||
        names.len / 4 != count || PyList_GET_SIZE(values) != count || i < 0 || n > count ||
        elem_ids.len != 4 * elems || attr_ids.len != 4 * attrs) {
        PyErr_SetString(PyExc_ValueError, "columns or labels of different lengths or types");
        goto out;
    }
    if ((qt = arg_id(self, qt_arg)) < 0 || (qb = arg_id(self, qb_arg)) < 0 ||
        (empty = arg_id(self, empty_arg)) < 0)
        goto out;
    if (start)
        frames->len = 0;
    for (; i < n; i++) {
        if (doc_of[i] != doc)
            break;
        int kind = kind_of[i];
        int name = name_of[i];
        if (kind != TEXT && (name < 0 || name >= (kind == ATTR ? attrs : elems))) {
            PyErr_Format(PyExc_ValueError, "event %zd: no label %d", i, name);
            goto fail;
        }
        if (kind == OPEN) {
            int32_t key[4] = {qt, elem_id[name], 0, 0}, child;
            Slot *s = table_find(&self->tables[PUSH_T], key);
            if (s->key[0] >= 0)
                child = s->a;
            else {
                Py_ssize_t made = push_states(self, qt, elem_id[name], self->star);
                if (made < 0 || table_put(&self->tables[PUSH_T], key, (int32_t)made, 0) < 0)
                    goto fail;
                child = (int32_t)made;
                computed++;
            }
            if (vec_push(frames, qt) < 0 || vec_push(frames, qb) < 0)
                goto fail;
            if (with_values) {
                PyObject *parts = PyList_New(0);
                if (parts == NULL || PyList_Append(texts, parts) < 0) {
                    Py_XDECREF(parts);
                    goto fail;
                }
                Py_DECREF(parts);
            }
            qt = child;
            qb = empty;
        } else if (kind == CLOSE) {
            if (frames->len < 2)
                break; /* the root closes: the Python code answers the document */
            if (with_values && PyList_GET_SIZE(texts) < 2) {
                PyErr_SetString(PyExc_ValueError, "texts: one list per open element");
                goto fail;
            }
            int32_t parent_qt = frames->data[frames->len - 2];
            int32_t parent_qb = frames->data[frames->len - 1];
            int32_t vq = empty, up, notes;
            PyObject *text = NULL;
            if (with_values) {
                PyObject *separator = PyUnicode_FromStringAndSize("", 0);
                text = separator == NULL ? NULL
                                         : PyUnicode_Join(separator, PyList_GET_ITEM(texts, PyList_GET_SIZE(texts) - 1));
                Py_XDECREF(separator);
                if (text == NULL)
                    goto fail;
                int32_t key[4] = {qt, 0, 0, 0};
                Slot *s = table_find(&self->tables[VALUES_T], key);
                PyObject *found = NULL;
                ValueIndex *index;
                int32_t side = s->b;
                if (s->key[0] >= 0 && s->a != BY_VALUE)
                    vq = s->a == NO_VALUES ? empty : s->a;
                else if (s->key[0] >= 0 && (found = by_value(self, side, text)) != NULL)
                    vq = miss_id(self, Py_NewRef(found));
                else if (s->key[0] >= 0 && !PyErr_Occurred() && (index = values_at(self, qt)) != NULL) {
                    vq = element_values(self, index, side, text);
                    computed++;
                } else {
                    PyObject *state = PyErr_Occurred() ? NULL : PyLong_FromLong(qt);
                    vq = state == NULL ? -1
                                       : miss_id(self, PyObject_CallFunctionObjArgs(values_miss, state, text, NULL));
                    Py_XDECREF(state);
                }
                if (vq < 0 || PyErr_Occurred()) {
                    Py_DECREF(text);
                    goto fail;
                }
            }
            int32_t key[4] = {parent_qt, qb, vq, elem_id[name]};
            Slot *s = table_find(&self->tables[CLOSE_T], key);
            if (s->key[0] >= 0) {
                up = s->a;
                notes = s->b;
            } else {
                Py_ssize_t up_id, notes_id, nb, nv;
                const int32_t *b = store_items(self->states, qb, &nb);
                const int32_t *v = store_items(self->states, vq, &nv);
                eval_begin(self);
                if (eval_base(self, b, nb) < 0 || eval_base(self, v, nv) < 0 ||
                    eval_pop(self, qt, elem_id[name], self->star, parent_qt, &up_id, &notes_id) < 0 ||
                    table_put(&self->tables[CLOSE_T], key, (int32_t)up_id, (int32_t)notes_id) < 0) {
                    Py_XDECREF(text);
                    goto fail;
                }
                up = (int32_t)up_id;
                notes = (int32_t)notes_id;
                computed++;
            }
            if (with_values) { /* the element's value joins its parent's */
                Py_ssize_t open = PyList_GET_SIZE(texts);
                int failed = PyList_Append(PyList_GET_ITEM(texts, open - 2), text) < 0 ||
                             PyList_SetSlice(texts, open - 1, open, NULL) < 0;
                Py_DECREF(text);
                if (failed)
                    goto fail;
            }
            if ((qb = add_entry(self, parent_qb, up, empty, &computed)) < 0)
                goto fail;
            if (notes != empty && note(proven, notes) < 0)
                goto fail;
            qt = parent_qt;
            frames->len -= 2;
        } else {
            PyObject *label, *value = PyList_GET_ITEM(values, i);
            int32_t lid;
            if (kind == ATTR) {
                label = PyList_GET_ITEM(attr_labels, name);
                lid = attr_id[name];
            } else {
                label = self->text_label;
                lid = self->text_id;
            }
            if (with_values && kind == TEXT) {
                Py_ssize_t open = PyList_GET_SIZE(texts);
                if (open < 1 || PyList_Append(PyList_GET_ITEM(texts, open - 1), value) < 0)
                    goto fail;
            }
            int32_t key[4] = {qt, lid, 0, 0}, popped, notes;
            Slot *s = table_find(&self->tables[LEAF_T], key);
            int32_t by = s->key[0] >= 0 ? s->b : -1; /* the side dict of entries by value */
            PyObject *entry = NULL;
            Slot *child;
            ValueIndex *index;
            if (s->key[0] >= 0 && s->a != BY_VALUE) {
                popped = s->a;
                notes = s->b;
            } else if (by >= 0 && (entry = by_value(self, by, value)) != NULL) {
                if (entry_pair(self, entry, &popped, &notes) < 0)
                    goto fail;
            } else if (PyErr_Occurred()) {
                goto fail;
            } else if (by >= 0 && value != Py_None &&
                       (child = table_find(&self->tables[PUSH_T], key))->key[0] >= 0 &&
                       (index = values_at(self, child->a)) != NULL) { /* computed here */
                if (leaf_values(self, index, by, child->a, lid, kind == ATTR ? self->attr_star : -1,
                                qt, value, &popped, &notes) < 0)
                    goto fail;
                computed++;
            } else { /* the Python machine computes it */
                PyObject *state = PyErr_Occurred() ? NULL : PyLong_FromLong(qt);
                if (state != NULL)
                    entry = PyObject_CallFunctionObjArgs(leaf_miss, state, label, value, NULL);
                Py_XDECREF(state);
                int failed = entry == NULL || entry_pair(self, entry, &popped, &notes) < 0;
                Py_XDECREF(entry);
                if (failed)
                    goto fail;
            }
            if ((qb = add_entry(self, qb, popped, empty, &computed)) < 0)
                goto fail;
            if (notes != empty && note(proven, notes) < 0)
                goto fail;
        }
    }
    result = Py_BuildValue("niin", i, qt, qb, computed);
fail:
out:
    PyBuffer_Release(&docs);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&names);
    PyBuffer_Release(&elem_ids);
    PyBuffer_Release(&attr_ids);
    return result;
}

static PyObject *kernel_clear(StateKernel *self, PyObject *unused)
{
    (void)unused;
    clear_sets(self);
    Py_RETURN_NONE;
}

static PyMethodDef kernel_methods[] = {
    {"eval_pop", (PyCFunction)kernel_eval_pop, METH_VARARGS,
     "eval_pop(bases, qt, label, parent_qt) -> (up, proven): eval at a node with top-down "
     "state qt, then t_pop to the parent (ids of interned sets)"},
    {"set_values", (PyCFunction)kernel_set_values, METH_VARARGS,
     "set_values(qt, index): the ValueIndex of the predicates enabled at top-down state qt; "
     "the walk then tests values there itself"},
    {"push", (PyCFunction)kernel_push, METH_VARARGS,
     "push(qt, label) -> the id of t_push: the top-down state of a child with label of a node "
     "with top-down state qt"},
    {"add", (PyCFunction)kernel_add, METH_VARARGS,
     "add(left, right) -> the id of t_add^b of two interned sets of states"},
    {"accept", (PyCFunction)kernel_accept, METH_VARARGS,
     "accept(bases, qt) -> the id of the set of initial and early states matched at the "
     "document node (they prove their filters)"},
    {"answer", (PyCFunction)kernel_answer, METH_VARARGS,
     "answer(found, proven) -> bytes: the sorted int32 ranks of the filters proven by the "
     "initial and early states found and the early states proven (a tuple of sets)"},
    {"answer_json", (PyCFunction)kernel_answer_json, METH_VARARGS,
     "answer_json(found, proven, slots, texts, ascii, widest, more=None) -> str: answer's "
     "ranks, with more (int32 bytes) merged in, as json_list writes them"},
    {"ids_of", (PyCFunction)kernel_ids_of, METH_VARARGS,
     "ids_of(ranks, ids) -> list: the ids (a list, by rank) of ranks (int32 bytes)"},
    {"walk", (PyCFunction)kernel_walk, METH_VARARGS,
     "walk(docs, kinds, names, values, doc, i, n, elem_labels, attr_labels, elem_ids, "
     "attr_ids, texts, empty, proven, qt, qb, start, (leaf_miss, values_miss)) "
     "-> (i, qt, qb, computed)\n\n"
     "Follow the tables over events i..n-1 of document doc from the state (qt, qb) inside its "
     "root (start: the first call for the document), computing missing push, close and add "
     "entries (computed counts them) and calling the misses for the others (they test "
     "values); stop before the close of the root or another document's event. elem_ids and "
     "attr_ids are int32 arrays: the label ids (label_ids) of elem_labels and attr_labels."},
    {"table", (PyCFunction)kernel_table, METH_O,
     "table(name) -> the table push, leaf, close, add or values, as a mapping"},
    {"label_ids", (PyCFunction)kernel_label_ids, METH_O,
     "label_ids(labels) -> list: the ids of labels in the tables' keys (added when new)"},
    {"clear", (PyCFunction)kernel_clear, METH_NOARGS, "clear(): forget every interned set"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef kernel_members[] = {
    {"states", T_OBJECT_EX, offsetof(StateKernel, states), READONLY,
     "the interned sets of AFA states (the machine's states)"},
    {"held", T_PYSSIZET, offsetof(StateKernel, held), READONLY,
     "the top-down states' bitmaps, in 8-byte entries"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StateKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.StateKernel",
    .tp_basicsize = sizeof(StateKernel),
    .tp_dealloc = (destructor)kernel_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StateKernel(kind, true_leaves, eps, watchers, early, initial, filters, back, "
              "prec=None): the XPush machine's states and tables over a workload's AFA; eps, "
              "watchers, early and initial are (offsets, items) pairs of native int32 arrays, "
              "prec a pair of such pairs (sets per state, states per set)",
    .tp_methods = kernel_methods,
    .tp_members = kernel_members,
    .tp_new = kernel_new,
};

/* ----- Counter: the counted filters over a document's events (counting.py) ----- */

/* The compiled twin of counting.CountingRun: a trie of paths of names from the document
 * node (its children by (node, label) in one open-addressing table), each node with the
 * atoms that hold where it is and a ValueIndex of its value atoms; per atom its head (the
 * anchor's node's number) and its filters; per filter its formula (postfix: an atom's
 * number, or after the atoms TRUE, FALSE, NOT, AND, OR), whether it holds with no atom
 * true, its rank. Stamps make resets free: an atom is true at an anchor when its stamp is
 * the anchor's, a filter touched there when its stamp is; per document the same with the
 * documents' count. A document may span calls of feed. */
enum { C_TRUE, C_FALSE, C_NOT, C_AND, C_OR, C_OPS };

/* A filter's run state, formula, rank and mark in one cache line: a document touches
 * hundreds of filters at random, and reading each one's stamps, counts, formula, rank or
 * mark from arrays of their own cost a miss apiece. */
enum { INLINE_CODE = 7 };
typedef struct {
    uint64_t stamp;      /* the anchor it was last touched at */
    uint64_t doc;        /* the document its matched and false_count are of */
    int32_t false_count; /* the anchors of its head where it was false, in doc */
    int32_t code;        /* its formula in code.items, where longer than INLINE_CODE */
    int32_t rank;        /* its rank among the machine's filters, or -1 - its number where it
                          * counts for equal filters too (ranks); an inner one's: 0, unread */
    int32_t mark;        /* the atom it makes true where it holds (an inner filter's), or -1 */
    uint16_t length;
    uint8_t matched, is_default;
    int32_t inline_code[INLINE_CODE];
} FilterInfo;
_Static_assert(sizeof(FilterInfo) == 64, "a filter's info: one cache line");
enum { PREFETCH_AHEAD = 8 }; /* filters ahead whose info is asked for (counter_mark) */

typedef struct {
    PyObject_HEAD
    Py_ssize_t nodes, atoms, filters, heads;
    EdgeMap children; /* (node << 32 | label) + 1 → child */
    int32_t *head_of;
    uint8_t *collect;
    Lists exists, postings, code, head_defaults;
    PyObject **indexes; /* per node: a ValueIndex, or NULL */
    int32_t *atom_head;
    Lists ranks;      /* per ranked filter, the ranks of the equal filters it counts for */
    int32_t rank_limit; /* above every rank */
    int32_t *marks; /* per filter: the atom it makes true where it holds (an inner filter's,
                     * counted_plans.plan_of), or -1 (it is answered); NULL: none is inner */
    uint8_t *truth;
    void *info_block;
    FilterInfo *info; /* per filter (info_block, aligned to 64 bytes) */
    uint64_t *bits;   /* for sort_unique over the filters */
    /* the run */
    uint64_t clock, document;
    uint64_t *atom_stamp, *head_stamp, *head_doc;
    int32_t *head_seen;
    IntVec *touched; /* per head */
    IntVec heads_seen, found, stack, values, answer;
    PyObject *texts;
    Py_ssize_t collecting;
    long long doc;
    int in_doc;
} Counter;

static PyTypeObject CounterType;

static void counter_dealloc(Counter *self)
{
    if (self->indexes != NULL)
        for (Py_ssize_t k = 0; k < self->nodes; k++)
            Py_XDECREF(self->indexes[k]);
    if (self->touched != NULL)
        for (Py_ssize_t h = 0; h < self->heads; h++)
            PyMem_Free(self->touched[h].data);
    edges_free(&self->children);
    void *blocks[] = {self->bits, self->head_of, self->collect, self->indexes, self->marks,
                      self->atom_head, self->ranks.at, self->ranks.items, self->info_block,
                      self->truth,
                      self->atom_stamp, self->head_stamp, self->head_doc, self->head_seen,
                      self->touched,
                      self->heads_seen.data, self->found.data, self->stack.data, self->answer.data,
                      self->values.data, self->exists.at, self->exists.items, self->postings.at,
                      self->postings.items, self->code.at, self->code.items,
                      self->head_defaults.at, self->head_defaults.items};
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++)
        PyMem_Free(blocks[k]);
    Py_XDECREF(self->texts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The child of node by label, or -1. */
static inline int32_t counter_child(const Counter *self, int32_t node, int32_t label)
{
    if (node < 0 || label < 0)
        return -1;
    return edges_get(&self->children, (((uint64_t)node << 32) | (uint32_t)label) + 1);
}

/* An int32 buffer of count items (count < 0: any), copied; NULL with an error. */
static int32_t *counter_ints(PyObject *object, Py_ssize_t *count, const char *what)
{
    Py_buffer buffer;
    if (PyObject_GetBuffer(object, &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    if (*count < 0)
        *count = buffer.len / 4;
    int32_t *out = copy_buffer(&buffer, *count, 4, what);
    PyBuffer_Release(&buffer);
    return out;
}

/* Whether the formulas are well formed (each leaves one value; no operator short of its
 * operands): the run evaluates them without checks. The deepest stack they need, or -1. */
static Py_ssize_t counter_check_code(Counter *self)
{
    Py_ssize_t deepest = 1;
    for (Py_ssize_t f = 0; f < self->filters; f++) {
        Py_ssize_t depth = 0;
        for (int32_t i = self->code.at[f]; i < self->code.at[f + 1]; i++) {
            int32_t op = self->code.items[i] - (int32_t)self->atoms;
            if (op < 0 || op == C_TRUE || op == C_FALSE)
                deepest = ++depth > deepest ? depth : deepest;
            else if (op == C_NOT ? depth < 1 : depth < 2)
                return -1;
            else if (op != C_NOT)
                depth--;
        }
        if (depth != 1)
            return -1;
    }
    return deepest;
}

static PyObject *counter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"children", "head_of",  "collect", "exists",        "indexes",
                               "atom_head", "postings", "code",    "defaults", "head_defaults",
                               "ranks",    "marks",    NULL};
    PyObject *children, *head_of, *exists, *indexes, *atom_head, *postings, *code;
    PyObject *head_defaults, *ranks, *marks = Py_None;
    Py_buffer collect, defaults;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOy*OO!OOOy*OO|O", keywords, &children,
                                     &head_of, &collect, &exists, &PyList_Type, &indexes,
                                     &atom_head, &postings, &code, &defaults, &head_defaults,
                                     &ranks, &marks))
        return NULL;
    Counter *self = (Counter *)type->tp_alloc(type, 0);
    if (self == NULL)
        goto done;
    Py_ssize_t nodes = -1, atoms = -1, filters = -1, ranked = -1, triples = -1, heads;
    int32_t *keys = NULL;
    if (!(self->head_of = counter_ints(head_of, &nodes, "head_of")) ||
        !(self->atom_head = counter_ints(atom_head, &atoms, "atom_head")) ||
        (ranked = load_lists(&self->ranks, ranks, -1, INT32_MAX, "ranks")) < 0 ||
        (marks != Py_None && !(self->marks = counter_ints(marks, &filters, "marks"))))
        goto fail;
    filters = self->marks != NULL ? filters : ranked;
    for (Py_ssize_t f = 0; self->marks != NULL && f < filters; f++)
        if (filters < ranked || (f < ranked ? self->marks[f] != -1
                                            : self->marks[f] < 0 || self->marks[f] >= atoms)) {
            PyErr_SetString(PyExc_ValueError, "marks: -1 for each ranked filter, then an atom "
                                              "for each inner one");
            goto fail;
        }
    self->nodes = nodes, self->atoms = atoms, self->filters = filters;
    if (nodes < 1 || collect.len != nodes || PyList_GET_SIZE(indexes) != nodes ||
        defaults.len != filters || atoms >= INT32_MAX - C_OPS) {
        PyErr_SetString(PyExc_ValueError, "Counter: one collect and index per node, one "
                                          "default per filter");
        goto fail;
    }
    if ((heads = load_lists(&self->head_defaults, head_defaults, -1, filters, "head_defaults")) < 0 ||
        load_lists(&self->exists, exists, nodes, atoms, "exists") < 0 ||
        load_lists(&self->postings, postings, atoms, filters, "postings") < 0 ||
        load_lists(&self->code, code, filters, atoms + C_OPS, "code") < 0)
        goto fail;
    self->heads = heads;
    Py_ssize_t deepest = counter_check_code(self);
    if (deepest < 0) {
        PyErr_SetString(PyExc_ValueError, "code: a formula is not well formed");
        goto fail;
    }
    for (Py_ssize_t k = 0; k < nodes; k++)
        if (self->head_of[k] < -1 || self->head_of[k] >= heads) {
            PyErr_SetString(PyExc_ValueError, "head_of: a head out of range");
            goto fail;
        }
    for (Py_ssize_t a = 0; a < atoms; a++)
        if (self->atom_head[a] < 0 || self->atom_head[a] >= heads) {
            PyErr_SetString(PyExc_ValueError, "atom_head: a head out of range");
            goto fail;
        }
    for (Py_ssize_t f = 0; f < ranked; f++) { /* each list ascending, by their first */
        const int32_t *r = self->ranks.items + self->ranks.at[f];
        int32_t count = self->ranks.at[f + 1] - self->ranks.at[f];
        int ok = count > 0 && (f == 0 || r[0] > self->ranks.items[self->ranks.at[f - 1]]);
        for (int32_t i = 1; i < count && ok; i++)
            ok = r[i] > r[i - 1];
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "ranks: ascending lists, by their first");
            goto fail;
        }
        if (r[count - 1] >= self->rank_limit)
            self->rank_limit = r[count - 1] + 1;
    }
    if (!(self->collect = PyMem_Malloc((size_t)nodes)) ||
        !(self->info_block = PyMem_Calloc((size_t)filters + 1, sizeof(FilterInfo))) ||
        !(self->indexes = PyMem_Calloc((size_t)nodes, sizeof(PyObject *))))
        goto nomemory;
    memcpy(self->collect, collect.buf, (size_t)nodes);
    self->info = (FilterInfo *)(((uintptr_t)self->info_block + 63) & ~(uintptr_t)63);
    for (Py_ssize_t f = 0; f < filters; f++) {
        FilterInfo *info = &self->info[f];
        int32_t at = self->code.at[f], length = self->code.at[f + 1] - at;
        if (length > UINT16_MAX) {
            PyErr_SetString(PyExc_ValueError, "code: a formula too long");
            goto fail;
        }
        info->is_default = ((const uint8_t *)defaults.buf)[f] != 0;
        int32_t at_rank = f < ranked ? self->ranks.at[f] : 0;
        info->rank = f >= ranked                                  ? 0
                     : self->ranks.at[f + 1] - at_rank == 1 ? self->ranks.items[at_rank]
                                                            : -1 - (int32_t)f;
        info->mark = self->marks != NULL ? self->marks[f] : -1;
        info->code = at;
        info->length = (uint16_t)length;
        if (length <= INLINE_CODE)
            memcpy(info->inline_code, self->code.items + at, (size_t)length * sizeof(int32_t));
    }
    for (Py_ssize_t k = 0; k < nodes; k++) {
        PyObject *index = PyList_GET_ITEM(indexes, k);
        if (index != Py_None && !Py_IS_TYPE(index, &ValueIndexType)) {
            PyErr_SetString(PyExc_TypeError, "indexes: a ValueIndex or None per node");
            goto fail;
        }
        if (index != Py_None) {
            if (((ValueIndex *)index)->limit > atoms) {
                PyErr_SetString(PyExc_ValueError, "indexes: states beyond the atoms");
                goto fail;
            }
            self->indexes[k] = Py_NewRef(index);
        }
    }
    if (!(keys = counter_ints(children, &triples, "children")))
        goto fail;
    if (triples % 3 || edges_reserve(&self->children, triples / 3) < 0) {
        PyMem_Free(keys);
        if (triples % 3)
            PyErr_SetString(PyExc_ValueError, "children: (node, label, child) triples");
        goto fail;
    }
    for (Py_ssize_t t = 0; t < triples; t += 3) {
        int32_t node = keys[t], label = keys[t + 1], child = keys[t + 2];
        if (node < 0 || node >= nodes || label < 0 || child <= 0 || child >= nodes) {
            PyMem_Free(keys);
            PyErr_SetString(PyExc_ValueError, "children: a node out of range");
            goto fail;
        }
        if (edges_put(&self->children, (((uint64_t)node << 32) | (uint32_t)label) + 1, child) < 0) {
            PyMem_Free(keys);
            goto fail;
        }
    }
    PyMem_Free(keys);
    size_t na = atoms ? (size_t)atoms : 1;
    size_t nh = heads ? (size_t)heads : 1;
    if (!(self->truth = PyMem_Calloc((size_t)deepest, 1)) || !(self->atom_stamp = PyMem_Calloc(na, 8)) ||
        !(self->head_stamp = PyMem_Calloc(nh, 8)) || !(self->head_doc = PyMem_Calloc(nh, 8)) ||
        !(self->head_seen = PyMem_Calloc(nh, 4)) || !(self->touched = PyMem_Calloc(nh, sizeof(IntVec))) ||
        !(self->bits = bitmap_new(self->rank_limit)) ||
        !(self->texts = PyList_New(0)))
        goto nomemory;
    goto done;
nomemory:
    if (!PyErr_Occurred())
        PyErr_NoMemory();
fail:
    Py_CLEAR(self);
done:
    PyBuffer_Release(&collect);
    PyBuffer_Release(&defaults);
    return (PyObject *)self;
}

static void counter_start(Counter *self, long long doc)
{
    self->doc = doc;
    self->in_doc = 1;
    self->document++;
    self->stack.len = self->heads_seen.len = self->found.len = 0;
    self->collecting = 0;
    PyList_SetSlice(self->texts, 0, PyList_GET_SIZE(self->texts), NULL);
}

/* The atom holds at its head's open anchor: its filters are touched there. */
static int counter_mark(Counter *self, int32_t atom)
{
    int32_t head = self->atom_head[atom];
    uint64_t stamp = self->head_stamp[head];
    if (self->atom_stamp[atom] == stamp)
        return 0;
    self->atom_stamp[atom] = stamp;
    IntVec *touched = &self->touched[head];
    const int32_t *items = self->postings.items;
    int32_t end = self->postings.at[atom + 1];
    for (int32_t i = self->postings.at[atom]; i < end; i++) {
        int32_t f = items[i];
        if (i + PREFETCH_AHEAD < end) /* the filters are at random: ask for a line early */
            __builtin_prefetch(&self->info[items[i + PREFETCH_AHEAD]], 1);
        if (self->info[f].stamp != stamp) {
            self->info[f].stamp = stamp;
            if (vec_push(touched, f) < 0)
                return -1;
        }
    }
    return 0;
}

static int counter_mark_all(Counter *self, const Lists *lists, int32_t node)
{
    for (int32_t i = lists->at[node]; i < lists->at[node + 1]; i++)
        if (counter_mark(self, lists->items[i]) < 0)
            return -1;
    return 0;
}

/* The value atoms of node that hold on value. */
static int counter_test(Counter *self, int32_t node, PyObject *value)
{
    if (!PyUnicode_Check(value))
        return 0;
    self->values.len = 0;
    if (value_index_states((ValueIndex *)self->indexes[node], value, &self->values) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < self->values.len; i++)
        if (counter_mark(self, self->values.data[i]) < 0)
            return -1;
    return 0;
}

static void counter_open_anchor(Counter *self, int32_t head)
{
    self->head_stamp[head] = ++self->clock;
    self->touched[head].len = 0;
    if (self->head_doc[head] != self->document) {
        self->head_doc[head] = self->document;
        self->head_seen[head] = 0;
        vec_push(&self->heads_seen, head); /* (room made at the document's start) */
    }
    self->head_seen[head]++;
}

static int counter_holds(Counter *self, int32_t f, uint64_t stamp)
{
    uint8_t *stack = self->truth;
    Py_ssize_t top = 0;
    int32_t atoms = (int32_t)self->atoms;
    const FilterInfo *info = &self->info[f];
    const int32_t *code = info->length <= INLINE_CODE ? info->inline_code : self->code.items + info->code;
    for (int32_t i = 0; i < info->length; i++) {
        int32_t op = code[i];
        if (op < atoms)
            stack[top++] = self->atom_stamp[op] == stamp;
        else if (op == atoms + C_TRUE || op == atoms + C_FALSE)
            stack[top++] = op == atoms + C_TRUE;
        else if (op == atoms + C_NOT)
            stack[top - 1] = !stack[top - 1];
        else {
            top--;
            stack[top - 1] = op == atoms + C_AND ? stack[top - 1] && stack[top]
                                                 : stack[top - 1] || stack[top];
        }
    }
    return stack[0];
}

static int counter_close_anchor(Counter *self, int32_t head)
{
    uint64_t stamp = self->head_stamp[head];
    IntVec *touched = &self->touched[head];
    for (Py_ssize_t i = 0; i < touched->len; i++) {
        int32_t f = touched->data[i];
        FilterInfo *info = &self->info[f];
        if (info->doc != self->document) {
            info->doc = self->document;
            info->false_count = 0;
            info->matched = 0;
        }
        if (counter_holds(self, f, stamp)) {
            if (info->mark >= 0) { /* an inner filter */
                if (counter_mark(self, info->mark) < 0)
                    return -1;
            } else if (!info->matched) {
                info->matched = 1;
                if (vec_push(&self->found, f) < 0)
                    return -1;
            }
        } else if (info->is_default)
            info->false_count++;
    }
    touched->len = 0;
    return 0;
}

/* The document's answer: the ranks of its matching filters (int32 bytes, ascending). */
static PyObject *counter_answer(Counter *self)
{
    IntVec *found = &self->found;
    for (Py_ssize_t k = 0; k < self->heads_seen.len; k++) {
        int32_t head = self->heads_seen.data[k];
        for (int32_t i = self->head_defaults.at[head]; i < self->head_defaults.at[head + 1]; i++) {
            int32_t f = self->head_defaults.items[i];
            const FilterInfo *info = &self->info[f];
            int fresh = info->doc != self->document;
            if ((fresh || (!info->matched && info->false_count < self->head_seen[head])) &&
                vec_push(found, f) < 0)
                return NULL;
        }
    }
    IntVec *ranks = &self->answer; /* the filters' ranks, and their equal filters' */
    ranks->len = 0;
    for (Py_ssize_t i = 0; i < found->len; i++) {
        int32_t rank = self->info[found->data[i]].rank;
        if (rank >= 0) {
            if (vec_push(ranks, rank) < 0)
                return NULL;
            continue;
        }
        for (int32_t j = self->ranks.at[-1 - rank]; j < self->ranks.at[-rank]; j++)
            if (vec_push(ranks, self->ranks.items[j]) < 0)
                return NULL;
    }
    if (ranks->len)
        sort_unique(ranks, self->bits, self->rank_limit);
    return PyBytes_FromStringAndSize((const char *)ranks->data, ranks->len * 4);
}

/* feed(docs, kinds, names, values, elem_ids, attr_ids, start, end) -> [(doc, ranks)] for
 * the documents completed in the events start:end of these columns (a batch's), ranks as
 * int32 bytes, ascending. */
static PyObject *counter_feed(Counter *self, PyObject *args)
{
    Py_buffer docs, kinds, names, elem_ids, attr_ids;
    PyObject *values;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*y*y*O!y*y*nn:feed", &docs, &kinds, &names, &PyList_Type,
                          &values, &elem_ids, &attr_ids, &start, &end))
        return NULL;
    PyObject *out = PyList_New(0);
    Py_ssize_t count = kinds.len, elems = elem_ids.len / 4, attrs = attr_ids.len / 4;
    const long long *doc_of = docs.buf;
    const unsigned char *kind_of = kinds.buf;
    const int *name_of = names.buf;
    const int32_t *elem_id = elem_ids.buf, *attr_id = attr_ids.buf;
    if (out == NULL)
        goto done;
    if (docs.itemsize != 8 || names.itemsize != 4 || docs.len / 8 != count ||
        names.len / 4 != count || PyList_GET_SIZE(values) != count || start < 0 ||
        end > count) {
        PyErr_SetString(PyExc_ValueError, "feed: columns of different lengths or types");
        goto fail;
    }
    for (Py_ssize_t i = start; i < end; i++) {
        int kind = kind_of[i], name = name_of[i];
        if (!self->in_doc || doc_of[i] != self->doc) { /* a new document */
            counter_start(self, doc_of[i]);
            if (vec_reserve(&self->heads_seen, self->heads) < 0)
                goto fail;
        }
        IntVec *stack = &self->stack;
        int32_t node = stack->len ? stack->data[stack->len - 2] : 0;
        if (kind != TEXT && kind <= CLOSE && (name < 0 || name >= (kind == ATTR ? attrs : elems))) {
            PyErr_Format(PyExc_ValueError, "event %zd: no label %d", i, name);
            goto fail;
        }
        if (kind == OPEN) {
            int32_t child = counter_child(self, node, elem_id[name]);
            if (vec_push(stack, child) < 0 ||
                vec_push(stack, (int32_t)PyList_GET_SIZE(self->texts)) < 0)
                goto fail;
            if (child >= 0) {
                if (self->head_of[child] >= 0)
                    counter_open_anchor(self, self->head_of[child]);
                if (counter_mark_all(self, &self->exists, child) < 0)
                    goto fail;
                self->collecting += self->collect[child];
            }
        } else if (kind == CLOSE) {
            if (stack->len < 2) {
                PyErr_Format(PyExc_ValueError, "event %zd: a close with no open element", i);
                goto fail;
            }
            int32_t start = stack->data[stack->len - 1];
            stack->len -= 2;
            if (node >= 0 && self->collect[node]) {
                Py_ssize_t end = PyList_GET_SIZE(self->texts);
                PyObject *value;
                if (end - start == 1)
                    value = Py_NewRef(PyList_GET_ITEM(self->texts, start));
                else {
                    PyObject *parts = PyList_GetSlice(self->texts, start, end);
                    PyObject *empty = parts ? PyUnicode_FromStringAndSize("", 0) : NULL;
                    value = empty ? PyUnicode_Join(empty, parts) : NULL;
                    Py_XDECREF(parts);
                    Py_XDECREF(empty);
                }
                int failed = value == NULL || counter_test(self, node, value) < 0;
                Py_XDECREF(value);
                if (failed)
                    goto fail;
                if (--self->collecting == 0 &&
                    PyList_SetSlice(self->texts, 0, PyList_GET_SIZE(self->texts), NULL) < 0)
                    goto fail;
            }
            if (node >= 0 && self->head_of[node] >= 0 &&
                counter_close_anchor(self, self->head_of[node]) < 0)
                goto fail;
            if (stack->len == 0) { /* the root closed: the document is complete */
                PyObject *ranks = counter_answer(self);
                PyObject *item = ranks ? Py_BuildValue("(LN)", doc_of[i], ranks) : NULL;
                if (item == NULL || PyList_Append(out, item) < 0) {
                    Py_XDECREF(item);
                    goto fail;
                }
                Py_DECREF(item);
                self->in_doc = 0;
            }
        } else if (kind == ATTR || kind == TEXT) {
            PyObject *value = PyList_GET_ITEM(values, i);
            if (kind == TEXT && self->collecting && value != Py_None &&
                PyList_Append(self->texts, value) < 0)
                goto fail;
            int32_t leaf = counter_child(self, node, kind == ATTR ? attr_id[name] : 0);
            if (leaf >= 0 && (counter_mark_all(self, &self->exists, leaf) < 0 ||
                              (self->indexes[leaf] != NULL && counter_test(self, leaf, value) < 0)))
                goto fail;
        } else {
            PyErr_Format(PyExc_ValueError, "event %zd: kind %d", i, kind);
            goto fail;
        }
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&docs);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&names);
    PyBuffer_Release(&elem_ids);
    PyBuffer_Release(&attr_ids);
    return out;
}

static PyObject *counter_reset(Counter *self, PyObject *unused)
{
    (void)unused;
    counter_start(self, -1);
    self->in_doc = 0;
    Py_RETURN_NONE;
}

static PyMethodDef counter_methods[] = {
    {"reset", (PyCFunction)counter_reset, METH_NOARGS,
     "reset(): forget the document begun (the next event starts one)"},
    {"feed", (PyCFunction)counter_feed, METH_VARARGS,
     "feed(docs, kinds, names, values, elem_ids, attr_ids, start, end) -> [(doc, ranks)]: "
     "the counted filters over a batch's events start:end; for each document completed "
     "there, the ranks of its matching filters (int32 bytes, ascending)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.Counter",
    .tp_basicsize = sizeof(Counter),
    .tp_dealloc = (destructor)counter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Counter(children, head_of, collect, exists, indexes, atom_head, postings, code, "
              "defaults, head_defaults, ranks, marks=None): counted filters "
              "(xcep.xpush.counting); ranks: (offsets, items), per answered filter the ranks "
              "it answers for (its equal filters'), ascending; marks: per filter -1, or the "
              "atom an inner filter makes true",
    .tp_methods = counter_methods,
    .tp_new = counter_new,
};

/* ----- plan_counted: counted filters planned in C (counting.CountedFilters) ----- */

/* An empty dict that keeps each key's hash in its table: made with a key that is not a str,
 * then emptied. CPython's dicts of str keys alone do not keep them, and a lookup that meets
 * another key on its way reads that key's object for its hash: a cache miss per step in a
 * table of hundreds of thousands of constants. */
static PyObject *hashed_dict(void)
{
    PyObject *dict = PyDict_New();
    if (dict != NULL && (PyDict_SetItem(dict, Py_None, Py_None) < 0 ||
                         PyDict_DelItem(dict, Py_None) < 0))
        Py_CLEAR(dict);
    return dict;
}

enum { RECENT_COMBOS = 4096 }; /* (template, names) pairs remembered by their objects */

typedef struct {
    PyObject *template, *names;
    int32_t combo;
} RecentCombo;

/* plan_counted(templates, constants, names, ranks, labels, tests, costs, sub_test)
 *   -> (children, head_of, is_element, atom_head, atom_tests, constants, exists,
 *       values, postings, code, defaults, head_defaults, groups)
 *
 * CountedFilters built (its reference: CountedFilters._shape, then _plan). templates,
 * constants and names: per filter, by rank, its template (a counted_plans.Template: its
 * plan's head, atoms and formula, names, places, default and choices are read once), its
 * constants and its names (tuples), three columns, the first `ranked` answered (the others
 * inner filters, counted_plans.plan_of), ranks (int32) the ranks of those among all filters; labels: the trie's {label: id}, extended here;
 * tests: the atoms' tests by number (None: existence), costs (float64) theirs; sub_test: the
 * number of the SUB test (counted_plans.py: an atom an inner filter makes true, in neither
 * exists nor values).
 *
 * First the trie, for each (template, names) met: the nodes of its head (the anchor) and of
 * its atoms' paths (a template's labels read as places of its names, the filter's names
 * put in), and a slot per (anchor, node, test). Then each filter's atoms (per slot, one per
 * constant, numbered as met). Equal answered filters (one template and names, the same
 * atoms) are one filter from here on, counted once (a workload repeats its common filters:
 * 84 % of seed's matches): the distinct filters, numbered by their first, then each inner
 * one; groups lists each one's filters. Then each one's formula over its atoms (the
 * operators after the atoms, as Counter takes it) and the atoms it is found by: of its
 * template's sets the one with the least summed cost (the test's cost times one plus a
 * hundredth of the distinct filters using the atom; the first such), or all of its atoms.
 * Lists come back as (offsets, items) pairs of int32 bytes: exists and values the
 * existence and the value atoms by node, postings the distinct filters by atom, code their
 * formulas, head_defaults by head those true with no atom, groups each one's filters (an
 * answered one by its rank, an inner one by its number);
 * children as int32 (node, label, child) triples in the order made, head_of and atom_head
 * as int32, is_element, atom_tests and defaults as bytes, constants a list (None for
 * existence). A template that names what its names do
 * not is a ValueError. */
typedef struct {
    PyObject *labels, *text_label;
    PyObject *attributes; /* name -> "@name" */
    EdgeMap children;     /* (node << 32 | label) + 1 -> child */
    IntVec child_keys, head_of, is_element, heads;
} Trie;

/* The id of the label coded `code` for a filter with `names` (-1 with an error). */
static int32_t trie_label(Trie *t, PyObject *names, int32_t code)
{
    PyObject *label = t->text_label;
    if (code != 0) {
        Py_ssize_t place = (code - 2) >> 1;
        if (code < 2 || place >= PyTuple_GET_SIZE(names) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(names, place))) {
            PyErr_SetString(PyExc_ValueError, "plan_counted: a label's name");
            return -1;
        }
        label = PyTuple_GET_ITEM(names, place);
        if (code & 1) {
            PyObject *name = label;
            if ((label = PyDict_GetItemWithError(t->attributes, name)) == NULL) {
                if (PyErr_Occurred() || (label = PyUnicode_FromFormat("@%U", name)) == NULL)
                    return -1;
                int failed = PyDict_SetItem(t->attributes, name, label);
                Py_DECREF(label); /* (the dict holds it) */
                if (failed < 0)
                    return -1;
            }
        }
    }
    PyObject *id = PyDict_GetItemWithError(t->labels, label);
    if (id != NULL)
        return (int32_t)PyLong_AsLong(id);
    if (PyErr_Occurred())
        return -1;
    PyObject *number = PyLong_FromSsize_t(PyDict_GET_SIZE(t->labels)); /* the next id */
    int failed = number == NULL || PyDict_SetItem(t->labels, label, number) < 0;
    Py_XDECREF(number);
    return failed ? -1 : (int32_t)(PyDict_GET_SIZE(t->labels) - 1);
}

/* The node `codes` lead to from `node` (made where missing), or -1 with an error. */
static int32_t trie_walk(Trie *t, int32_t node, PyObject *names, const int32_t *codes,
                         const int32_t *end)
{
    for (; codes < end; codes++) {
        if (!t->is_element.data[node]) {
            PyErr_SetString(PyExc_ValueError, "a path below an attribute or text");
            return -1;
        }
        int32_t label = trie_label(t, names, *codes);
        if (label < 0)
            return -1;
        uint64_t key = ((uint64_t)(uint32_t)node << 32 | (uint32_t)label) + 1;
        int32_t child = edges_get(&t->children, key);
        if (child < 0) {
            child = (int32_t)t->head_of.len;
            if (vec_push(&t->head_of, -1) < 0 || vec_push(&t->is_element, *codes % 2 == 0 && *codes) < 0 ||
                vec_push(&t->child_keys, node) < 0 || vec_push(&t->child_keys, label) < 0 ||
                vec_push(&t->child_keys, child) < 0 || edges_put(&t->children, key, child) < 0)
                return -1;
        }
        node = child;
    }
    return node;
}

/* Templates as read by plan_counted: per template its head's label codes (0: text(), 2 + 2k
 * the element names[k], 3 + 2k the attribute names[k]), its atoms (each its labels' codes,
 * test and constant's place, -1 for none), its formula (operators 0-4, atom k as C_OPS + k),
 * its choices (a count, then each set's size and atoms; none: all atoms), its default. */
typedef struct {
    PyObject *ids; /* template -> its number */
    IntVec head_at, head, atom_at, label_at, labels, test, place, formula_at, formula,
        choice_at, choice, fallback;
} Templates;

/* The code of a label of a template with `names`, or -1 (none of them). */
static int32_t label_code(PyObject *names, PyObject *label)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(label);
    int attribute = length > 0 && PyUnicode_READ_CHAR(label, 0) == '@';
    if (!attribute && PyUnicode_CompareWithASCIIString(label, "#text") == 0)
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names) && k < (INT32_MAX - 3) / 2; k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        if (PyUnicode_Check(name) && PyUnicode_GET_LENGTH(name) == length - attribute &&
            PyUnicode_Tailmatch(label, name, attribute, length, -1) == 1)
            return 2 + 2 * (int32_t)k + attribute;
    }
    return -1;
}

/* Push the codes of a tuple of labels; -1 with an error. */
static int push_labels(IntVec *out, PyObject *names, PyObject *labels)
{
    if (!PyTuple_Check(labels))
        return PyErr_SetString(PyExc_TypeError, "plan_counted: labels are a tuple"), -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(labels); i++) {
        PyObject *label = PyTuple_GET_ITEM(labels, i);
        int32_t code = PyUnicode_Check(label) ? label_code(names, label) : -1;
        if (code < 0) {
            PyErr_SetString(PyExc_ValueError, "plan_counted: a label that is none of the names");
            return -1;
        }
        if (vec_push(out, code) < 0)
            return -1;
    }
    return 0;
}

/* A tuple of ints attribute's items (ints), or NULL with an error. */
static PyObject *int_tuple(PyObject *of, const char *name)
{
    PyObject *value = PyObject_GetAttrString(of, name);
    if (value != NULL && !PyTuple_Check(value)) {
        Py_CLEAR(value);
        PyErr_Format(PyExc_TypeError, "plan_counted: %s is a tuple", name);
    }
    return value;
}

/* The number of `template` (read when new), or -1 with an error. */
static int32_t template_of(Templates *ts, PyObject *template, PyObject *tests)
{
    PyObject *known = PyDict_GetItemWithError(ts->ids, template);
    if (known != NULL)
        return (int32_t)PyLong_AsLong(known);
    if (PyErr_Occurred())
        return -1;
    int32_t k = (int32_t)ts->head_at.len - 1, failed = 1;
    PyObject *plan = PyObject_GetAttrString(template, "plan");
    PyObject *names = int_tuple(template, "names"), *places = int_tuple(template, "places");
    PyObject *head = plan ? int_tuple(plan, "head") : NULL;
    PyObject *atoms = plan ? int_tuple(plan, "atoms") : NULL;
    PyObject *formula = plan ? int_tuple(plan, "formula") : NULL;
    PyObject *choices = PyObject_GetAttrString(template, "choices");
    PyObject *fallback = PyObject_GetAttrString(template, "default");
    int is_default = fallback ? PyObject_IsTrue(fallback) : -1;
    if (names == NULL || places == NULL || head == NULL || atoms == NULL || formula == NULL ||
        choices == NULL || is_default < 0 || push_labels(&ts->head, names, head) < 0 ||
        vec_push(&ts->head_at, (int32_t)ts->head.len) < 0)
        goto done;
    if (PyTuple_GET_SIZE(places) != PyTuple_GET_SIZE(atoms)) {
        PyErr_SetString(PyExc_ValueError, "plan_counted: a place per atom");
        goto done;
    }
    for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(atoms); a++) {
        PyObject *atom = PyTuple_GET_ITEM(atoms, a);
        if (!PyTuple_Check(atom) || PyTuple_GET_SIZE(atom) != 3) {
            PyErr_SetString(PyExc_TypeError, "plan_counted: atoms of (labels, test, constant)");
            goto done;
        }
        Py_ssize_t test = PySequence_Index(tests, PyTuple_GET_ITEM(atom, 1));
        long place = PyLong_AsLong(PyTuple_GET_ITEM(places, a));
        if (test < 0 || (place == -1 && PyErr_Occurred()) || place < -1 || place > INT32_MAX ||
            push_labels(&ts->labels, names, PyTuple_GET_ITEM(atom, 0)) < 0 ||
            vec_push(&ts->label_at, (int32_t)ts->labels.len) < 0 ||
            vec_push(&ts->test, (int32_t)test) < 0 || vec_push(&ts->place, (int32_t)place) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "plan_counted: an atom's place");
            goto done;
        }
    }
    if (vec_push(&ts->atom_at, (int32_t)ts->test.len) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(formula); i++) {
        long op = PyLong_AsLong(PyTuple_GET_ITEM(formula, i));
        if ((op == -1 && PyErr_Occurred()) || op < -C_OPS || op > INT32_MAX - C_OPS)
            goto done;
        if (vec_push(&ts->formula, (int32_t)(op < 0 ? -1 - op : C_OPS + op)) < 0)
            goto done;
    }
    if (vec_push(&ts->formula_at, (int32_t)ts->formula.len) < 0)
        goto done;
    if (choices != Py_None) { /* a count, then each set's size and atoms */
        if (!PyTuple_Check(choices) || vec_push(&ts->choice, (int32_t)PyTuple_GET_SIZE(choices)) < 0)
            goto done;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(choices); j++) {
            PyObject *set = PyTuple_GET_ITEM(choices, j);
            if (!PyTuple_Check(set) || vec_push(&ts->choice, (int32_t)PyTuple_GET_SIZE(set)) < 0)
                goto done;
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(set); i++) {
                long atom = PyLong_AsLong(PyTuple_GET_ITEM(set, i));
                if (atom < 0 || atom >= PyTuple_GET_SIZE(atoms) || vec_push(&ts->choice, (int32_t)atom) < 0)
                    goto done;
            }
        }
    }
    PyObject *number = PyLong_FromLong(k);
    failed = number == NULL || vec_push(&ts->choice_at, (int32_t)ts->choice.len) < 0 ||
             vec_push(&ts->fallback, is_default) < 0 || PyDict_SetItem(ts->ids, template, number) < 0;
    Py_XDECREF(number);
done:
    if (failed && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "plan_counted: a template");
    Py_XDECREF(plan), Py_XDECREF(names), Py_XDECREF(places), Py_XDECREF(head);
    Py_XDECREF(atoms), Py_XDECREF(formula), Py_XDECREF(choices), Py_XDECREF(fallback);
    return failed ? -1 : k;
}

static PyObject *ints_bytes(const int32_t *items, Py_ssize_t count)
{
    return PyBytes_FromStringAndSize((const char *)items, count * 4);
}

static PyObject *vec_bytes(const IntVec *v)
{
    return ints_bytes(v->data, v->len);
}

/* (offsets, items) of int32 bytes: the lists of the items i < count with keep[i] by their
 * key[i] < n, ascending in each list. */
static PyObject *grouped(const int32_t *key, const uint8_t *keep, Py_ssize_t count, Py_ssize_t n)
{
    int32_t *at = PyMem_Calloc((size_t)n + 2, sizeof(int32_t));
    int32_t *items = at ? PyMem_Malloc(((size_t)count + 1) * sizeof(int32_t)) : NULL;
    if (items == NULL) {
        PyMem_Free(at);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++)
        at[key[i] + 2] += keep[i];
    for (Py_ssize_t k = 0; k < n; k++)
        at[k + 2] += at[k + 1];
    for (Py_ssize_t i = 0; i < count; i++)
        if (keep[i])
            items[at[key[i] + 1]++] = (int32_t)i;
    PyObject *result = Py_BuildValue("(NN)", ints_bytes(at, n + 1), ints_bytes(items, at[n]));
    PyMem_Free(at);
    PyMem_Free(items);
    return result;
}

static PyObject *plan_counted(PyObject *module, PyObject *args)
{
    PyObject *templates, *values_of, *names_of, *labels, *tests;
    Py_buffer costs, ranks;
    int sub_test;
    if (!PyArg_ParseTuple(args, "O!O!O!y*O!O!y*i:plan_counted", &PyList_Type, &templates,
                          &PyList_Type, &values_of, &PyList_Type, &names_of, &ranks,
                          &PyDict_Type, &labels, &PyTuple_Type, &tests, &costs, &sub_test))
        return NULL;
    const int32_t *rank_of = ranks.buf;
    Py_ssize_t ranked = ranks.len / (Py_ssize_t)sizeof(int32_t);
    PyObject *result = NULL, *combos = PyDict_New(), *slot_atoms = PyList_New(0);
    PyObject *constants = PyList_New(0), *defaults = NULL;
    Trie t = {labels, PyUnicode_FromString("#text"), PyDict_New()};
    Templates ts = {PyDict_New()};
    EdgeMap slot_of = {0};
    IntVec combo_template = {0}, combo_head = {0}, combo_slots = {0}, combo_at = {0},
           filter_combo = {0}, slot_head = {0}, slot_node = {0}, slot_op = {0}, numbers = {0},
           numbers_at = {0}, atom_slot = {0}, atom_node = {0}, atom_head = {0}, chosen = {0},
           chosen_at = {0}, first = {0};
    int32_t *uses = NULL, *post_at = NULL, *post_items = NULL, *fill = NULL, *code_at = NULL,
            *code_items = NULL, *hd_at = NULL, *hd_items = NULL, *group_at = NULL,
            *group_items = NULL, *distinct_of = NULL;
    uint64_t *equal = NULL; /* open addressing: a hash's high half, then 1 + a filter */
    RecentCombo *recent = NULL;
    uint8_t *atom_op = NULL, *exists_keep = NULL;
    double *atom_cost = NULL;
    const double *op_cost = costs.buf;
    Py_ssize_t filters = PyList_GET_SIZE(templates);
    if (PyList_GET_SIZE(values_of) != filters || PyList_GET_SIZE(names_of) != filters ||
        ranks.len % sizeof(int32_t) || ranked > filters) {
        PyErr_SetString(PyExc_ValueError,
                        "plan_counted: templates, constants, names alike long; ranks int32");
        goto done;
    }
    if (combos == NULL || slot_atoms == NULL || constants == NULL || t.text_label == NULL ||
        t.attributes == NULL || ts.ids == NULL)
        goto done;
    if (costs.len != PyTuple_GET_SIZE(tests) * (Py_ssize_t)sizeof(double) || PyTuple_GET_SIZE(tests) > 255) {
        PyErr_SetString(PyExc_ValueError, "plan_counted: a cost per test");
        goto done;
    }
    if ((recent = PyMem_Calloc(RECENT_COMBOS, sizeof(RecentCombo))) == NULL)
        goto nomemory;
    IntVec *starts[] = {&ts.head_at, &ts.atom_at, &ts.label_at, &ts.formula_at, &ts.choice_at};
    for (size_t k = 0; k < sizeof starts / sizeof *starts; k++)
        if (vec_push(starts[k], 0) < 0)
            goto done;
    if (vec_push(&t.head_of, -1) < 0 || vec_push(&t.is_element, 1) < 0 || /* the document */
        vec_push(&combo_at, 0) < 0 || vec_push(&numbers_at, 0) < 0 || vec_push(&chosen_at, 0) < 0)
        goto done;
    /* the trie, and each filter's (template, names) */
    for (Py_ssize_t f = 0; f < filters; f++) {
        PyObject *template = PyList_GET_ITEM(templates, f), *names = PyList_GET_ITEM(names_of, f);
        if (f + PLAN_AHEAD < filters) /* a million filters' tuples are far apart: asked early */
            __builtin_prefetch(PyList_GET_ITEM(values_of, f + PLAN_AHEAD));
        if (!PyTuple_Check(PyList_GET_ITEM(values_of, f)) || !PyTuple_Check(names)) {
            PyErr_SetString(PyExc_TypeError, "plan_counted: constants and names are tuples");
            goto done;
        }
        /* a filter's (template, names) is mostly one met just before, as the same objects:
         * its combination found without a tuple made and hashed */
        RecentCombo *seen = &recent[((uintptr_t)template >> 4 ^ (uintptr_t)names >> 3) %
                                    RECENT_COMBOS];
        if (seen->template == template && seen->names == names) {
            if (vec_push(&filter_combo, seen->combo) < 0)
                goto done;
            continue;
        }
        PyObject *key = PyTuple_Pack(2, template, names);
        PyObject *combo = key ? PyDict_GetItemWithError(combos, key) : NULL;
        if (combo != NULL) {
            Py_DECREF(key);
            *seen = (RecentCombo){template, names, (int32_t)PyLong_AsLong(combo)};
            if (vec_push(&filter_combo, seen->combo) < 0)
                goto done;
            continue;
        }
        int32_t k = key && !PyErr_Occurred() ? template_of(&ts, template, tests) : -1;
        if (k < 0) {
            Py_XDECREF(key);
            goto done;
        }
        int32_t anchor = trie_walk(&t, 0, names, ts.head.data + ts.head_at.data[k],
                                   ts.head.data + ts.head_at.data[k + 1]);
        if (anchor >= 0 && t.head_of.data[anchor] < 0) {
            t.head_of.data[anchor] = (int32_t)t.heads.len;
            if (vec_push(&t.heads, anchor) < 0)
                anchor = -1;
        }
        for (int32_t a = ts.atom_at.data[k]; anchor >= 0 && a < ts.atom_at.data[k + 1]; a++) {
            int32_t node = trie_walk(&t, anchor, names, ts.labels.data + ts.label_at.data[a],
                                     ts.labels.data + ts.label_at.data[a + 1]);
            if (node < 0 || node >= (1 << 28)) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_OverflowError, "plan_counted: too many nodes");
                anchor = -1;
                break;
            }
            uint64_t slot_key = ((uint64_t)anchor << 36 | (uint64_t)node << 8 | (uint64_t)ts.test.data[a]) + 1;
            int32_t slot = edges_get(&slot_of, slot_key);
            if (slot < 0) {
                PyObject *atoms = hashed_dict();
                slot = (int32_t)slot_head.len;
                if (atoms == NULL || PyList_Append(slot_atoms, atoms) < 0 ||
                    edges_put(&slot_of, slot_key, slot) < 0 ||
                    vec_push(&slot_head, t.head_of.data[anchor]) < 0 ||
                    vec_push(&slot_node, node) < 0 || vec_push(&slot_op, ts.test.data[a]) < 0)
                    anchor = -1;
                Py_XDECREF(atoms);
            }
            if (anchor >= 0 && vec_push(&combo_slots, slot) < 0)
                anchor = -1;
        }
        PyObject *id = anchor >= 0 ? PyLong_FromSsize_t(combo_head.len) : NULL;
        int failed = id == NULL || PyDict_SetItem(combos, key, id) < 0 ||
                     vec_push(&filter_combo, (int32_t)combo_head.len) < 0 ||
                     vec_push(&combo_template, (int32_t)k) < 0 ||
                     vec_push(&combo_head, t.head_of.data[anchor]) < 0 ||
                     vec_push(&combo_at, (int32_t)combo_slots.len) < 0;
        Py_XDECREF(id);
        Py_DECREF(key);
        if (failed)
            goto done;
        *seen = (RecentCombo){template, names, filter_combo.data[f]};
    }
    /* each filter's atoms: one per slot and constant */
    for (Py_ssize_t f = 0; f < filters; f++) {
        int32_t c = filter_combo.data[f], k = combo_template.data[c];
        PyObject *values = PyList_GET_ITEM(values_of, f);
        if (f + PLAN_AHEAD < filters) { /* the constants of a filter ahead (its tuple asked */
            PyObject *ahead = PyList_GET_ITEM(values_of, f + PLAN_AHEAD); /* for before) */
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ahead) && i < 4; i++)
                __builtin_prefetch(PyTuple_GET_ITEM(ahead, i));
            if (f + 2 * PLAN_AHEAD < filters)
                __builtin_prefetch(PyList_GET_ITEM(values_of, f + 2 * PLAN_AHEAD));
        }
        for (int32_t a = ts.atom_at.data[k], i = combo_at.data[c]; a < ts.atom_at.data[k + 1]; a++, i++) {
            int32_t slot = combo_slots.data[i], place = ts.place.data[a];
            if (place >= PyTuple_GET_SIZE(values)) {
                PyErr_SetString(PyExc_ValueError, "plan_counted: a constant's place");
                goto done;
            }
            PyObject *value = place < 0 ? Py_None : PyTuple_GET_ITEM(values, place);
            PyObject *atoms = PyList_GET_ITEM(slot_atoms, slot);
            PyObject *found = PyDict_GetItemWithError(atoms, value);
            int32_t atom;
            if (found != NULL) {
                atom = (int32_t)PyLong_AsLong(found);
            } else if (PyErr_Occurred()) {
                goto done;
            } else { /* a new atom: the slot's test of this constant */
                atom = (int32_t)atom_slot.len;
                PyObject *number = PyLong_FromLong(atom);
                int failed = number == NULL || PyDict_SetItem(atoms, value, number) < 0 ||
                             PyList_Append(constants, value) < 0 ||
                             vec_push(&atom_slot, slot) < 0 ||
                             vec_push(&atom_node, slot_node.data[slot]) < 0 ||
                             vec_push(&atom_head, slot_head.data[slot]) < 0;
                Py_XDECREF(number);
                if (failed)
                    goto done;
            }
            if (vec_push(&numbers, atom) < 0)
                goto done;
        }
        if (vec_push(&numbers_at, (int32_t)numbers.len) < 0)
            goto done;
    }
    /* equal filters (one template and names, so the same atoms) counted once: the ranked
     * ones' distinct filters numbered as first met (first: the first filter of each), then
     * each inner one (after `ranked`, distinct already) a filter of its own */
    size_t mask = 1023;
    while (mask < 2 * (size_t)ranked)
        mask = 2 * mask + 1;
    if (!(distinct_of = PyMem_Malloc(((size_t)filters + 1) * sizeof(int32_t))) ||
        !(equal = PyMem_Calloc(mask + 1, sizeof(uint64_t))))
        goto nomemory;
    for (Py_ssize_t f = 0; f < filters; f++) {
        Py_ssize_t d = first.len;
        const int32_t *atoms = numbers.data + numbers_at.data[f];
        int32_t count = numbers_at.data[f + 1] - numbers_at.data[f];
        uint64_t h = hash_items(atoms, count) ^ ((uint64_t)filter_combo.data[f] * 0x9E3779B97F4A7C15ULL);
        for (size_t i = (size_t)h & mask; f < ranked; i = (i + 1) & mask) {
            if (equal[i] == 0) { /* new: its own */
                equal[i] = (h & 0xFFFFFFFF00000000ULL) | (uint64_t)(f + 1);
                break;
            }
            int32_t g = (int32_t)(equal[i] & 0xFFFFFFFF) - 1;
            if ((equal[i] >> 32) == (h >> 32) && filter_combo.data[g] == filter_combo.data[f] &&
                numbers_at.data[g + 1] - numbers_at.data[g] == count &&
                memcmp(numbers.data + numbers_at.data[g], atoms, (size_t)count * sizeof(int32_t)) == 0) {
                d = distinct_of[g]; /* an earlier one's */
                break;
            }
        }
        distinct_of[f] = (int32_t)d;
        if (d == first.len && vec_push(&first, (int32_t)f) < 0)
            goto done;
    }
    Py_ssize_t distinct = first.len;
    if (!(group_at = PyMem_Calloc((size_t)distinct + 1, sizeof(int32_t))) ||
        !(group_items = PyMem_Malloc(((size_t)filters + 1) * sizeof(int32_t))))
        goto nomemory;
    for (Py_ssize_t f = 0; f < filters; f++)
        group_at[distinct_of[f] + 1]++;
    for (Py_ssize_t d = 0; d < distinct; d++)
        group_at[d + 1] += group_at[d];
    for (Py_ssize_t f = 0; f < filters; f++)
        group_items[group_at[distinct_of[f]]++] = f < ranked ? rank_of[f] : (int32_t)f;
    for (Py_ssize_t d = distinct; d > 0; d--) /* (each moved to its end: back to its start) */
        group_at[d] = group_at[d - 1];
    group_at[0] = 0;
    Py_ssize_t natoms = atom_slot.len, nheads = t.heads.len;
    /* the costs of the atoms, from the (distinct) filters that use them */
    if (!(uses = PyMem_Calloc((size_t)natoms + 1, sizeof(int32_t))) ||
        !(atom_cost = PyMem_Malloc(((size_t)natoms + 1) * sizeof(double))) ||
        !(atom_op = PyMem_Malloc((size_t)natoms + 1)) ||
        !(exists_keep = PyMem_Malloc((size_t)natoms + 1)))
        goto nomemory;
    for (Py_ssize_t d = 0; d < distinct; d++)
        for (int32_t i = numbers_at.data[first.data[d]]; i < numbers_at.data[first.data[d] + 1]; i++)
            uses[numbers.data[i]]++;
    for (Py_ssize_t a = 0; a < natoms; a++) {
        atom_op[a] = (uint8_t)slot_op.data[atom_slot.data[a]];
        exists_keep[a] = atom_op[a] == 0; /* (a SUB atom: neither, its inner filter marks it) */
        atom_cost[a] = op_cost[atom_op[a]] * (1.0 + (double)uses[a] / 100.0);
    }
    /* the atoms each (distinct) filter is found by */
    for (Py_ssize_t d = 0; d < distinct; d++) {
        int32_t f = first.data[d], k = combo_template.data[filter_combo.data[f]];
        int32_t from = numbers_at.data[f], local = numbers_at.data[f + 1] - from;
        const int32_t *c = ts.choice.data + ts.choice_at.data[k], *end = ts.choice.data + ts.choice_at.data[k + 1];
        if (c == end) { /* all of its atoms */
            for (int32_t i = 0; i < local; i++)
                if (vec_push(&chosen, numbers.data[from + i]) < 0)
                    goto done;
        } else {
            const int32_t *best = NULL;
            double least = 0;
            int32_t sets = *c++;
            for (int32_t j = 0; j < sets; j++) {
                if (c >= end || c + 1 + *c > end) {
                    PyErr_SetString(PyExc_ValueError, "plan_counted: a template's choices");
                    goto done;
                }
                double total = 0;
                for (int32_t i = 1; i <= *c; i++) {
                    if (c[i] >= local) {
                        PyErr_SetString(PyExc_ValueError, "plan_counted: a choice's atom");
                        goto done;
                    }
                    total += atom_cost[numbers.data[from + c[i]]];
                }
                if (best == NULL || total < least)
                    best = c, least = total;
                c += 1 + *c;
            }
            for (int32_t i = 1; best != NULL && i <= *best; i++)
                if (vec_push(&chosen, numbers.data[from + best[i]]) < 0)
                    goto done;
        }
        if (vec_push(&chosen_at, (int32_t)chosen.len) < 0)
            goto done;
    }
    /* postings: by atom, its filters ascending (a counting sort) */
    if (!(post_at = PyMem_Calloc((size_t)natoms + 1, sizeof(int32_t))) ||
        !(post_items = PyMem_Malloc(((size_t)chosen.len + 1) * sizeof(int32_t))) ||
        !(fill = PyMem_Malloc(((size_t)natoms + (size_t)nheads + 1) * sizeof(int32_t))))
        goto nomemory;
    for (Py_ssize_t i = 0; i < chosen.len; i++)
        post_at[chosen.data[i] + 1]++;
    for (Py_ssize_t a = 0; a < natoms; a++)
        post_at[a + 1] += post_at[a];
    memcpy(fill, post_at, (size_t)natoms * sizeof(int32_t));
    for (Py_ssize_t d = 0; d < distinct; d++)
        for (int32_t i = chosen_at.data[d]; i < chosen_at.data[d + 1]; i++)
            post_items[fill[chosen.data[i]]++] = (int32_t)d;
    /* formulas over the atoms, operators after them; the filters true with none, by head */
    Py_ssize_t code_count = 0;
    for (Py_ssize_t d = 0; d < distinct; d++) {
        int32_t k = combo_template.data[filter_combo.data[first.data[d]]];
        code_count += ts.formula_at.data[k + 1] - ts.formula_at.data[k];
    }
    if (!(code_at = PyMem_Malloc(((size_t)distinct + 1) * sizeof(int32_t))) ||
        !(code_items = PyMem_Malloc(((size_t)code_count + 1) * sizeof(int32_t))) ||
        !(hd_at = PyMem_Calloc((size_t)nheads + 1, sizeof(int32_t))) ||
        !(hd_items = PyMem_Malloc(((size_t)distinct + 1) * sizeof(int32_t))))
        goto nomemory;
    if ((defaults = PyBytes_FromStringAndSize(NULL, distinct)) == NULL)
        goto done;
    char *default_of = PyBytes_AS_STRING(defaults);
    Py_ssize_t at = 0;
    code_at[0] = 0;
    for (Py_ssize_t d = 0; d < distinct; d++) {
        int32_t f = first.data[d], c = filter_combo.data[f], k = combo_template.data[c];
        int32_t from = numbers_at.data[f], local = numbers_at.data[f + 1] - from;
        for (int32_t i = ts.formula_at.data[k]; i < ts.formula_at.data[k + 1]; i++) {
            int32_t op = ts.formula.data[i];
            if (op >= C_OPS && op - C_OPS >= local) {
                PyErr_SetString(PyExc_ValueError, "plan_counted: a formula's atom");
                goto done;
            }
            code_items[at++] = op < C_OPS ? (int32_t)natoms + op : numbers.data[from + op - C_OPS];
        }
        code_at[d + 1] = (int32_t)at;
        default_of[d] = (char)(ts.fallback.data[k] != 0);
        if (ts.fallback.data[k])
            hd_at[combo_head.data[c] + 1]++;
    }
    for (Py_ssize_t h = 0; h < nheads; h++)
        hd_at[h + 1] += hd_at[h];
    memcpy(fill, hd_at, (size_t)nheads * sizeof(int32_t));
    for (Py_ssize_t d = 0; d < distinct; d++) {
        int32_t c = filter_combo.data[first.data[d]];
        if (ts.fallback.data[combo_template.data[c]])
            hd_items[fill[combo_head.data[c]]++] = (int32_t)d;
    }
    Py_ssize_t nodes = t.head_of.len;
    uint8_t *is_element = PyMem_Malloc((size_t)nodes);
    if (is_element == NULL)
        goto nomemory;
    for (Py_ssize_t n = 0; n < nodes; n++)
        is_element[n] = (uint8_t)t.is_element.data[n];
    PyObject *exists = grouped(atom_node.data, exists_keep, natoms, nodes), *values = NULL;
    for (Py_ssize_t a = 0; a < natoms; a++)
        exists_keep[a] = atom_op[a] != 0 && atom_op[a] != sub_test;
    if (exists == NULL || (values = grouped(atom_node.data, exists_keep, natoms, nodes)) == NULL) {
        Py_XDECREF(exists);
        PyMem_Free(is_element);
        goto done;
    }
    result = Py_BuildValue(
        "(NNNNNONN(NN)(NN)O(NN)(NN))", vec_bytes(&t.child_keys), vec_bytes(&t.head_of),
        PyBytes_FromStringAndSize((const char *)is_element, nodes),
        vec_bytes(&atom_head), PyBytes_FromStringAndSize((const char *)atom_op, natoms),
        constants, exists, values, ints_bytes(post_at, natoms + 1),
        ints_bytes(post_items, chosen.len), ints_bytes(code_at, distinct + 1),
        ints_bytes(code_items, at), defaults, ints_bytes(hd_at, nheads + 1),
        ints_bytes(hd_items, hd_at[nheads]), ints_bytes(group_at, distinct + 1),
        ints_bytes(group_items, filters));
    PyMem_Free(is_element);
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    PyMem_Free(recent);
    PyBuffer_Release(&costs);
    PyBuffer_Release(&ranks);
    Py_XDECREF(ts.ids);
    Py_XDECREF(combos);
    Py_XDECREF(slot_atoms);
    Py_XDECREF(constants);
    Py_XDECREF(defaults);
    Py_XDECREF(t.text_label);
    Py_XDECREF(t.attributes);
    edges_free(&t.children);
    edges_free(&slot_of);
    IntVec *vecs[] = {&t.child_keys, &t.head_of, &t.is_element, &t.heads, &combo_template,
                      &combo_head, &combo_slots, &combo_at, &filter_combo, &slot_head,
                      &slot_node, &slot_op, &numbers, &numbers_at, &atom_slot, &atom_node,
                      &atom_head, &chosen, &chosen_at, &first, &ts.head_at, &ts.head, &ts.atom_at,
                      &ts.label_at, &ts.labels, &ts.test, &ts.place, &ts.formula_at,
                      &ts.formula, &ts.choice_at, &ts.choice, &ts.fallback};
    for (size_t k = 0; k < sizeof vecs / sizeof *vecs; k++)
        PyMem_Free(vecs[k]->data);
    void *blocks[] = {uses,     post_at,     post_items, fill,    code_at,
                      code_items, hd_at,   hd_items,   atom_op, exists_keep,
                      atom_cost, group_at, group_items, distinct_of, equal};
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++)
        PyMem_Free(blocks[k]);
    return result;
}

/* The next of two ascending int32 arrays merged (x[*i] or y[*j], that one's index moved
 * on; one of them must have one left): merge_ranks and json_list's more. */
static inline int32_t next_merged(const int32_t *x, Py_ssize_t nx, Py_ssize_t *i,
                                  const int32_t *y, Py_ssize_t ny, Py_ssize_t *j)
{
    return *j == ny || (*i < nx && x[*i] <= y[*j]) ? x[(*i)++] : y[(*j)++];
}

/* merge_ranks(a, b) -> bytes: two ascending int32 arrays (bytes) merged, ascending. */
static PyObject *merge_ranks(PyObject *module, PyObject *args)
{
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*:merge_ranks", &a, &b))
        return NULL;
    Py_ssize_t na = a.len / 4, nb = b.len / 4, i = 0, j = 0, k = 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (na + nb) * 4);
    if (out != NULL) {
        const int32_t *x = a.buf, *y = b.buf;
        int32_t *z = (int32_t *)PyBytes_AS_STRING(out);
        while (i < na || j < nb)
            z[k++] = next_merged(x, na, &i, y, nb, &j);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return out;
}

/* json_list(ranks, slots, texts, ascii, widest, more=None) -> str: "[" the texts of the ranks
 * (int32 bytes) joined by "," "]" (the ids: JsonIds, slots from json_slots). more: other ranks, merged in (both
 * ascending, none in both). One pass: the text is made as long as the widest ids would make
 * it, then cut to its length. */
static PyObject *json_list(PyObject *module, PyObject *args)
{
    Py_buffer ranks, slots, texts, more = {0};
    PyObject *more_ranks = Py_None;
    int ascii;
    Py_ssize_t widest;
    PyObject *out = NULL;
    JsonIds ids;
    if (!PyArg_ParseTuple(args, "y*y*y*pn|O", &ranks, &slots, &texts, &ascii, &widest, &more_ranks))
        return NULL;
    if (more_ranks != Py_None && PyObject_GetBuffer(more_ranks, &more, PyBUF_SIMPLE) < 0)
        goto done;
    const int32_t *rank = ranks.buf, *extra = more.buf;
    Py_ssize_t count = ranks.len / 4, count2 = more.len / 4;
    if (json_ids_of(&slots, &texts, ascii, widest, &ids) < 0)
        goto done;
    if (ranks.len % 4 || more.len % 4) {
        PyErr_SetString(PyExc_ValueError, "json_list: ranks int32");
        goto done;
    }
    for (Py_ssize_t i = 0; i < count + count2; i++) {
        int32_t r = i < count ? rank[i] : extra[i - count];
        if (r < 0 || r >= ids.n) {
            PyErr_Format(PyExc_ValueError, "filter %d out of range", r);
            goto done;
        }
    }
    Py_ssize_t room = json_room(&ids, count + count2);
    if (room == 0) { /* long ids: their lengths summed */
        room = 2;
        for (Py_ssize_t i = 0; i < count + count2; i++)
            room += 1 + json_id_length(&ids, i < count ? rank[i] : extra[i - count]);
    }
    char *buffer = json_buffer(&ids, room, &out), *at = buffer;
    if (buffer == NULL)
        goto done;
    *at++ = '[';
    for (Py_ssize_t i = 0, j = 0; i < count || j < count2;) { /* the two merged, ascending */
        /* the slots, far apart among a million ids, asked for ahead of use */
        if (i + JSON_AHEAD < count)
            __builtin_prefetch(ids.slots + (size_t)rank[i + JSON_AHEAD] * JSON_SLOT);
        if (j + JSON_AHEAD < count2)
            __builtin_prefetch(ids.slots + (size_t)extra[j + JSON_AHEAD] * JSON_SLOT);
        at = put_json_id(&ids, next_merged(rank, count, &i, extra, count2, &j), at, buffer,
                         buffer + room);
    }
    *at++ = ']';
    out = json_done(&ids, out, buffer, at);
done:
    PyBuffer_Release(&ranks);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&texts);
    if (more.obj != NULL)
        PyBuffer_Release(&more);
    return out;
}


/* An index argument: a Python int in [0, limit), else -1 (with an error set or not). */
static Py_ssize_t index_in(PyObject *value, Py_ssize_t limit)
{
    Py_ssize_t i = PyLong_Check(value) ? PyLong_AsSsize_t(value) : -1;
    return i >= 0 && i < limit ? i : -1;
}

/* ----- replay: a filter's program (afa.py: Program) replayed into the AFA's state table ----- */

/* The opcodes of Program.codes (afa.py: _OPCODES). */
enum { OP_TRUE, OP_FALSE, OP_LEAF, OP_STEP, OP_NAMED_STEP, OP_LOOP, OP_LOOP_OR_TEXT, OP_ALL_OF,
       OP_ANY_OF, OP_NEGATE, OP_OWN };
enum { AFA_OR = 0, AFA_AND = 1, AFA_NOT = 2 };

typedef struct {
    PyObject *kind, *eps, *label, *target, *predicate, *shared, *predicate_class;
} AfaLists;

static PyObject *s_true, *s_false, *s_leaf, *s_step, *s_loop, *s_loop_or_text, *s_and, *s_or,
    *s_not, *s_star, *s_text, *s_empty;

/* AFA.state: the state of `key` (a new reference, stolen; NULL: always a new state), made with
 * these parts (borrowed; NULL: None, or () for eps) when unseen; -1 on error. */
static Py_ssize_t afa_state(AfaLists *a, PyObject *key, long kind, PyObject *eps, PyObject *label,
                            PyObject *target, PyObject *predicate)
{
    Py_ssize_t state = -1;
    if (key == NULL && PyErr_Occurred())
        return -1;
    if (key != NULL) {
        PyObject *found = PyDict_GetItemWithError(a->shared, key);
        if (found != NULL) {
            Py_DECREF(key);
            return PyLong_AsSsize_t(found);
        }
        if (PyErr_Occurred())
            goto out;
    }
    PyObject *k = PyLong_FromLong(kind);
    if (k == NULL)
        goto out;
    int bad = PyList_Append(a->kind, k);
    Py_DECREF(k);
    if (bad || PyList_Append(a->eps, eps != NULL ? eps : s_empty) < 0 ||
        PyList_Append(a->label, label != NULL ? label : Py_None) < 0 ||
        PyList_Append(a->target, target != NULL ? target : Py_None) < 0 ||
        PyList_Append(a->predicate, predicate != NULL ? predicate : Py_None) < 0)
        goto out;
    state = PyList_GET_SIZE(a->kind) - 1;
    if (key != NULL) {
        PyObject *number = PyLong_FromSsize_t(state);
        if (number == NULL || PyDict_SetItem(a->shared, key, number) < 0)
            state = -1;
        Py_XDECREF(number);
    }
out:
    Py_XDECREF(key);
    return state;
}

static Py_ssize_t afa_true(AfaLists *a)
{
    return afa_state(a, PyTuple_Pack(1, s_true), AFA_OR, NULL, NULL, NULL, Py_True);
}

static Py_ssize_t afa_step(AfaLists *a, PyObject *label, Py_ssize_t target)
{
    PyObject *t = PyLong_FromSsize_t(target);
    if (t == NULL)
        return -1;
    Py_ssize_t state = afa_state(a, PyTuple_Pack(3, s_step, label, t), AFA_OR, NULL, label, t, NULL);
    Py_DECREF(t);
    return state;
}

static int compare_states(const void *x, const void *y)
{
    Py_ssize_t a = *(const Py_ssize_t *)x, b = *(const Py_ssize_t *)y;
    return (a > b) - (a < b);
}

/* The states of `items` (indexes into `states`), sorted, each once, as a tuple; with
 * `skip_true`, those whose predicate is TRUE left out; *any_true: whether one was TRUE. */
static PyObject *state_items(AfaLists *a, PyObject *items, const Py_ssize_t *states, int skip_true,
                             int *any_true)
{
    Py_ssize_t n = PyTuple_GET_SIZE(items), kept = 0;
    Py_ssize_t *buffer = PyMem_Malloc((n ? n : 1) * sizeof *buffer);
    if (buffer == NULL)
        return PyErr_NoMemory();
    *any_true = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t state = states[PyLong_AsSsize_t(PyTuple_GET_ITEM(items, i))];
        if (PyList_GET_ITEM(a->predicate, state) == Py_True) {
            *any_true = 1;
            if (skip_true)
                continue;
        }
        buffer[kept++] = state;
    }
    qsort(buffer, (size_t)kept, sizeof *buffer, compare_states);
    Py_ssize_t unique = 0;
    for (Py_ssize_t i = 0; i < kept; i++)
        if (unique == 0 || buffer[unique - 1] != buffer[i])
            buffer[unique++] = buffer[i];
    PyObject *out = PyTuple_New(unique);
    for (Py_ssize_t i = 0; out != NULL && i < unique; i++) {
        PyObject *number = PyLong_FromSsize_t(buffer[i]);
        if (number == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, number);
    }
    PyMem_Free(buffer);
    return out;
}

/* Builder.all_of / own (with an owner key) / any_of over the states `items`. */
static Py_ssize_t afa_combine(AfaLists *a, int op, PyObject *items, const Py_ssize_t *states,
                              PyObject *owner)
{
    int any_true;
    PyObject *kept = state_items(a, items, states, op != OP_ANY_OF, &any_true);
    if (kept == NULL)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(kept), state;
    if (op == OP_OWN && owner != Py_None) {
        Py_INCREF(owner);
        state = n ? afa_state(a, owner, AFA_AND, kept, NULL, NULL, NULL)
                  : afa_state(a, owner, AFA_OR, NULL, NULL, NULL, Py_True);
    } else if (n == 0 || (op == OP_ANY_OF && any_true)) {
        state = afa_true(a);
    } else if (n == 1) {
        state = PyLong_AsSsize_t(PyTuple_GET_ITEM(kept, 0));
    } else {
        PyObject *word = op == OP_ANY_OF ? s_or : s_and;
        state = afa_state(a, PyTuple_Pack(2, word, kept), op == OP_ANY_OF ? AFA_OR : AFA_AND, kept,
                          NULL, NULL, NULL);
    }
    Py_DECREF(kept);
    return state;
}

static Py_ssize_t afa_loop(AfaLists *a, PyObject *word, Py_ssize_t inner, Py_ssize_t text)
{
    PyObject *i = PyLong_FromSsize_t(inner), *t = text >= 0 ? PyLong_FromSsize_t(text) : NULL;
    PyObject *eps = i == NULL ? NULL : text >= 0 ? (t ? PyTuple_Pack(2, i, t) : NULL)
                                                 : PyTuple_Pack(1, i);
    Py_ssize_t loop = -1;
    if (eps != NULL)
        loop = afa_state(a, PyTuple_Pack(2, word, i), AFA_OR, eps, s_star, NULL, NULL);
    if (loop >= 0) { /* a // loop's * transition goes to itself */
        PyObject *self = PyLong_FromSsize_t(loop);
        if (self == NULL || PyList_SetItem(a->target, loop, self) < 0)
            loop = -1;
    }
    Py_XDECREF(i);
    Py_XDECREF(t);
    Py_XDECREF(eps);
    return loop;
}

static PyObject *replay(PyObject *module, PyObject *args)
{
    AfaLists a;
    PyObject *codes, *constants, *names, *owner;
    Py_ssize_t root, early;
    (void)module;
    if (!PyArg_ParseTuple(args, "(O!O!O!O!O!O!O)O!nnO!O!O:replay", &PyList_Type, &a.kind,
                          &PyList_Type, &a.eps, &PyList_Type, &a.label, &PyList_Type, &a.target,
                          &PyList_Type, &a.predicate, &PyDict_Type, &a.shared, &a.predicate_class,
                          &PyTuple_Type, &codes, &root, &early, &PyTuple_Type, &constants,
                          &PyTuple_Type, &names, &owner))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(codes);
    if (root < 0 || root >= n || early >= n) {
        PyErr_SetString(PyExc_ValueError, "replay: root or early outside the program");
        return NULL;
    }
    Py_ssize_t *states = PyMem_Malloc((n ? n : 1) * sizeof *states);
    if (states == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *code = PyTuple_GET_ITEM(codes, i);
        if (!PyTuple_Check(code) || PyTuple_GET_SIZE(code) < 1)
            goto bad;
        long op = PyLong_AsLong(PyTuple_GET_ITEM(code, 0));
        Py_ssize_t size = PyTuple_GET_SIZE(code), state = -1;
#define ARG(k) PyTuple_GET_ITEM(code, (k))
#define INDEX(k, limit) index_in(ARG(k), (limit))
        switch (op) {
        case OP_TRUE:
            state = afa_true(&a);
            break;
        case OP_FALSE:
            state = afa_state(&a, PyTuple_Pack(1, s_false), AFA_OR, NULL, NULL, NULL, NULL);
            break;
        case OP_LEAF: { /* (op, constant index) */
            Py_ssize_t c;
            if (size != 3 || (c = index_in(ARG(2), PyTuple_GET_SIZE(constants))) < 0)
                goto bad;
            PyObject *value = PyTuple_GET_ITEM(constants, c);
            PyObject *key = PyTuple_Pack(3, s_leaf, ARG(1), value);
            if (key == NULL)
                goto out;
            PyObject *found = PyDict_GetItemWithError(a.shared, key);
            if (found != NULL) {
                Py_DECREF(key);
                state = PyLong_AsSsize_t(found);
                break;
            }
            PyObject *predicate =
                PyErr_Occurred() ? NULL
                                 : PyObject_CallFunctionObjArgs(a.predicate_class, ARG(1), value, NULL);
            if (predicate == NULL) {
                Py_DECREF(key);
                goto out;
            }
            state = afa_state(&a, key, AFA_OR, NULL, NULL, NULL, predicate);
            Py_DECREF(predicate);
            break;
        }
        case OP_STEP: { /* (label, state index) */
            Py_ssize_t t;
            if (size != 3 || !PyUnicode_Check(ARG(1)) || (t = INDEX(2, i)) < 0)
                goto bad;
            state = afa_step(&a, ARG(1), states[t]);
            break;
        }
        case OP_NAMED_STEP: { /* (prefix, name index, state index) */
            Py_ssize_t m, t;
            if (size != 4 || !PyUnicode_Check(ARG(1)) ||
                (m = index_in(ARG(2), PyTuple_GET_SIZE(names))) < 0 || (t = INDEX(3, i)) < 0)
                goto bad;
            PyObject *name = PyTuple_GET_ITEM(names, m);
            PyObject *label = PyUnicode_GET_LENGTH(ARG(1)) ? PyUnicode_Concat(ARG(1), name) : name;
            if (label == NULL)
                goto out;
            if (label == name)
                Py_INCREF(label);
            state = afa_step(&a, label, states[t]);
            Py_DECREF(label);
            break;
        }
        case OP_LOOP:
        case OP_LOOP_OR_TEXT: { /* (state index) */
            Py_ssize_t t;
            if (size != 2 || (t = INDEX(1, i)) < 0)
                goto bad;
            if (op == OP_LOOP) {
                state = afa_loop(&a, s_loop, states[t], -1);
            } else {
                Py_ssize_t text = afa_step(&a, s_text, states[t]);
                state = text < 0 ? -1 : afa_loop(&a, s_loop_or_text, states[t], text);
            }
            break;
        }
        case OP_ALL_OF:
        case OP_ANY_OF:
        case OP_OWN: { /* (tuple of state indexes) */
            if (size != 2 || !PyTuple_Check(ARG(1)))
                goto bad;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(ARG(1)); k++)
                if (index_in(PyTuple_GET_ITEM(ARG(1), k), i) < 0)
                    goto bad;
            state = afa_combine(&a, (int)op, ARG(1), states, owner);
            break;
        }
        case OP_NEGATE: { /* (state index) */
            Py_ssize_t t;
            if (size != 2 || (t = INDEX(1, i)) < 0)
                goto bad;
            PyObject *item = PyLong_FromSsize_t(states[t]);
            PyObject *eps = item ? PyTuple_Pack(1, item) : NULL;
            if (eps != NULL)
                state = afa_state(&a, PyTuple_Pack(2, s_not, item), AFA_NOT, eps, NULL, NULL, NULL);
            Py_XDECREF(item);
            Py_XDECREF(eps);
            break;
        }
        default:
            goto bad;
        }
#undef ARG
#undef INDEX
        if (state < 0)
            goto out;
        states[i] = state;
    }
    if (early >= 0)
        result = Py_BuildValue("nn", states[root], states[early]);
    else
        result = Py_BuildValue("nO", states[root], Py_None);
    goto out;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "replay: a malformed program step");
out:
    PyMem_Free(states);
    return result;
}


/* ----- filter_shape: a filter's text with its constants and names cut out (workload.py) ----- */

/* The character classes: filter_text.h. */

/* The end of a string, number or name piece starting at `pos` (its kind in *kind: 1, 2, 3),
 * or -1: the alternatives of PIECE_PATTERN tried in order, as re.split does at `pos`. */
static Py_ssize_t shape_piece(int ukind, const void *data, Py_ssize_t n, Py_ssize_t pos, int *kind)
{
#define CH(i) PyUnicode_READ(ukind, data, (i))
    Py_UCS4 c = CH(pos);
    if (c == '\'' || c == '"') {
        for (Py_ssize_t j = pos + 1; j < n; j++)
            if (CH(j) == c) {
                *kind = 1;
                return j + 1;
            }
        return -1; /* no closing quote: nothing else starts with a quote */
    }
    Py_UCS4 before = pos > 0 ? CH(pos - 1) : 0;
    if (pos == 0 || !shape_name_char(before)) { /* a number where a token starts */
        Py_ssize_t p = pos + (c == '-');
        if (p < n && shape_digit(CH(p))) {
            while (p < n && shape_digit(CH(p)))
                p++;
            if (p < n && CH(p) == '.')
                for (p++; p < n && shape_digit(CH(p)); p++)
                    ;
            *kind = 2;
            return p;
        }
        if (p + 1 < n && CH(p) == '.' && shape_digit(CH(p + 1))) {
            for (p++; p < n && shape_digit(CH(p)); p++)
                ;
            *kind = 2;
            return p;
        }
    }
    if ((pos > 0 && (shape_name_char(before) || before == ':')) || !shape_name_start(c))
        return -1;
    Py_ssize_t q = pos + 1;
    while (q < n && shape_name_char(CH(q)))
        q++;
    if (q + 1 < n && CH(q) == ':' && shape_name_start(CH(q + 1))) /* prefix:name */
        for (q += 2; q < n && shape_name_char(CH(q)); q++)
            ;
    /* not before a name character, ':' or '(' (space allowed before those two): a
     * shorter name would stand before a name character, so none matches */
    Py_ssize_t r = q;
    if (r < n && (shape_name_char(CH(r)) || CH(r) == ':' || CH(r) == '('))
        return -1;
    while (r < n && Py_UNICODE_ISSPACE(CH(r)))
        r++;
    if (r < n && (CH(r) == '(' || CH(r) == ':'))
        return -1;
    *kind = 3;
    return q;
#undef CH
}

/* A piece cut out of a filter: its span in the text (a string's without its quotes), its
 * kind (1 string, 2 number, 3 name), its object and, for a number, its value. */
typedef struct {
    Py_ssize_t start, end;
    int kind;
    PyObject *object;
    double number;
} ShapePiece;

/* Names met in filters, kept as one object each (NAME_CACHE slots by a hash of their text,
 * a newer name taking an older one's slot): the many filters naming alike share their
 * names' objects, made and hashed once. */
enum { NAME_CACHE = 4096 };
static PyObject *name_cache[NAME_CACHE];

/* Whether text[start:end] (of kind ukind, at data) reads as str. */
static int same_text(int ukind, const void *data, Py_ssize_t start, Py_ssize_t end, PyObject *str)
{
    if (PyUnicode_GET_LENGTH(str) != end - start)
        return 0;
    if (PyUnicode_KIND(str) == ukind)
        return memcmp(PyUnicode_DATA(str), (const char *)data + start * ukind,
                      (size_t)((end - start) * ukind)) == 0;
    for (Py_ssize_t i = start; i < end; i++)
        if (PyUnicode_READ(ukind, data, i) != PyUnicode_READ_CHAR(str, i - start))
            return 0;
    return 1;
}

/* The str of text[start:end] (a new reference), the cached one for a name. */
static PyObject *shape_text(PyObject *text, int ukind, const void *data, Py_ssize_t start,
                            Py_ssize_t end, int name)
{
    if (!name)
        return PyUnicode_Substring(text, start, end);
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = start; i < end; i++)
        h = (h ^ PyUnicode_READ(ukind, data, i)) * 1099511628211ULL;
    PyObject **slot = &name_cache[h & (NAME_CACHE - 1)];
    if (*slot != NULL && same_text(ukind, data, start, end, *slot))
        return Py_NewRef(*slot);
    PyObject *made = PyUnicode_Substring(text, start, end);
    if (made != NULL)
        Py_XSETREF(*slot, Py_NewRef(made));
    return made;
}

/* A number piece's value as float() reads it: its characters (ASCII digits, '-', '.') read
 * here, any other (digits beyond ASCII) by float(). -1 with an error. */
static int shape_number(PyObject *text, int ukind, const void *data, ShapePiece *piece)
{
    char digits[64];
    Py_ssize_t length = piece->end - piece->start;
    int ascii = length < (Py_ssize_t)sizeof digits;
    for (Py_ssize_t i = 0; ascii && i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(ukind, data, piece->start + i);
        ascii = c < 128;
        digits[i] = (char)c;
    }
    if (ascii) {
        digits[length] = 0;
        char *stop;
        piece->number = PyOS_string_to_double(digits, &stop, NULL);
        if (piece->number == -1.0 && PyErr_Occurred())
            return -1;
        if (*stop == 0)
            return 0;
    }
    PyObject *str = PyUnicode_Substring(text, piece->start, piece->end);
    piece->object = str ? PyFloat_FromString(str) : NULL;
    Py_XDECREF(str);
    if (piece->object == NULL)
        return -1;
    piece->number = PyFloat_AS_DOUBLE(piece->object);
    return 0;
}

/* A tuple of the pieces' objects. */
static PyObject *shape_tuple(ShapePiece *pieces, Py_ssize_t count)
{
    PyObject *tuple = PyTuple_New(count);
    for (Py_ssize_t i = 0; tuple != NULL && i < count; i++)
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(pieces[i].object));
    return tuple;
}

/* Filters' names tuples, one object per naming met lately (NAMES_CACHE slots by a hash of
 * their names' objects, which name_cache keeps one each): the many filters naming alike
 * share one tuple, made once, with no tuple made and hashed per filter to find it. */
enum { NAMES_CACHE = 4096 };
static PyObject *names_cache[NAMES_CACHE];

static PyObject *names_tuple(ShapePiece *names, Py_ssize_t count)
{
    uint64_t h = (uint64_t)count;
    for (Py_ssize_t i = 0; i < count; i++)
        h = (h ^ (uintptr_t)names[i].object >> 4) * 1099511628211ULL;
    PyObject **slot = &names_cache[(h ^ h >> 29) & (NAMES_CACHE - 1)];
    int same = *slot != NULL && PyTuple_GET_SIZE(*slot) == count;
    for (Py_ssize_t i = 0; same && i < count; i++)
        same = PyTuple_GET_ITEM(*slot, i) == names[i].object;
    if (same)
        return Py_NewRef(*slot);
    PyObject *made = shape_tuple(names, count);
    if (made != NULL)
        Py_XSETREF(*slot, Py_NewRef(made));
    return made;
}

/* (shape, constants, names) of one filter's text (filter_shape), or NULL with an error.
 * pieces: room for as many pieces as the text has characters. */
static PyObject *shape_one(PyObject *text, Py_UCS4 *key, ShapePiece *constants, ShapePiece *names)
{
    int ukind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), pos = 0, length = 0, nconst = 0, nnames = 0;
    PyObject *result = NULL;
    int nul = 0;
    while (pos < n) {
        int kind = 0;
        Py_ssize_t end = shape_piece(ukind, data, n, pos, &kind);
        if (end < 0) {
            Py_UCS4 c = PyUnicode_READ(ukind, data, pos);
            nul |= c == 0;
            key[length++] = c;
            pos++;
            continue;
        }
        ShapePiece piece = {kind == 1 ? pos + 1 : pos, kind == 1 ? end - 1 : end, kind, NULL, 0};
        pos = end;
        Py_UCS4 tag = kind == 1 ? 's' : kind == 2 ? 'n' : 'm';
        if (kind == 3 && piece.end - piece.start <= 3) { /* and, or: words of the grammar */
            const char *word = piece.end - piece.start == 3 ? "and" : "or";
            int is_word = piece.end - piece.start >= 2;
            for (Py_ssize_t i = 0; is_word && i < piece.end - piece.start; i++)
                is_word = PyUnicode_READ(ukind, data, piece.start + i) == (Py_UCS4)word[i];
            if (is_word) {
                key[length++] = 0, key[length++] = word[0] == 'a' ? 'w' : 'o', key[length++] = 1;
                continue;
            }
        }
        if (kind == 2 && shape_number(text, ukind, data, &piece) < 0)
            goto out;
        /* its place: the first equal piece's (numbers by value, others by text) */
        ShapePiece *table = kind == 3 ? names : constants;
        Py_ssize_t count = kind == 3 ? nnames : nconst, at = 0;
        for (; at < count; at++) {
            const ShapePiece *other = &table[at];
            Py_ssize_t size = piece.end - piece.start;
            if (other->kind == kind &&
                (kind == 2 ? other->number == piece.number
                           : other->end - other->start == size &&
                                 memcmp((const char *)data + other->start * ukind,
                                        (const char *)data + piece.start * ukind,
                                        (size_t)(size * ukind)) == 0))
                break;
        }
        if (at == count) {
            if (piece.object == NULL && kind == 2)
                piece.object = PyFloat_FromDouble(piece.number);
            else if (piece.object == NULL)
                piece.object = shape_text(text, ukind, data, piece.start, piece.end, kind == 3);
            if (piece.object == NULL)
                goto out;
            table[at] = piece;
            piece.object = NULL; /* (the table holds it) */
            if (kind == 3)
                nnames++;
            else
                nconst++;
        }
        Py_XDECREF(piece.object);
        if (at >= 0x10FFFF - 1) {
            PyErr_SetString(PyExc_ValueError, "filter_shape: too many constants or names");
            goto out;
        }
        key[length++] = 0, key[length++] = tag, key[length++] = (Py_UCS4)(1 + at);
    }
    PyObject *shape = nul ? Py_BuildValue("(sO)", "text", text)
                          : PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, key, length);
    if (shape != NULL)
        result = Py_BuildValue("NNN", shape, shape_tuple(constants, nconst), names_tuple(names, nnames));
out:
    for (Py_ssize_t i = 0; i < nconst; i++)
        Py_DECREF(constants[i].object);
    for (Py_ssize_t i = 0; i < nnames; i++)
        Py_DECREF(names[i].object);
    return result;
}

/* filter_shapes(texts) -> (shapes, constants, names): filter_shape of each of a list of
 * texts, as three lists. */
static PyObject *filter_shapes(PyObject *module, PyObject *texts)
{
    (void)module;
    if (!PyList_Check(texts)) {
        PyErr_SetString(PyExc_TypeError, "filter_shapes: a list of str");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(texts), room = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "filter_shapes: a list of str");
            return NULL;
        }
        room = PyUnicode_GET_LENGTH(text) > room ? PyUnicode_GET_LENGTH(text) : room;
    }
    Py_UCS4 *key = PyMem_Malloc(((size_t)room * 4 + 1) * sizeof(Py_UCS4));
    ShapePiece *pieces = PyMem_Malloc(((size_t)room + 1) * 2 * sizeof(ShapePiece));
    PyObject *columns[3] = {PyList_New(count), PyList_New(count), PyList_New(count)};
    PyObject *result = NULL;
    if (key == NULL || pieces == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (columns[0] == NULL || columns[1] == NULL || columns[2] == NULL)
        goto out;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *one = shape_one(PyList_GET_ITEM(texts, i), key, pieces, pieces + room + 1);
        if (one == NULL)
            goto out;
        for (int c = 0; c < 3; c++)
            PyList_SET_ITEM(columns[c], i, Py_NewRef(PyTuple_GET_ITEM(one, c)));
        Py_DECREF(one);
    }
    result = Py_BuildValue("OOO", columns[0], columns[1], columns[2]);
out:
    PyMem_Free(key);
    PyMem_Free(pieces);
    for (int c = 0; c < 3; c++)
        Py_XDECREF(columns[c]);
    return result;
}

/* filter_shape(text) -> (shape, constants, names) (workload._shape's, its reference): the
 * one text's of filter_shapes. */
static PyObject *filter_shape(PyObject *module, PyObject *text)
{
    PyObject *one = PyList_New(1), *columns = NULL, *result = NULL;
    if (one == NULL)
        return NULL;
    PyList_SET_ITEM(one, 0, Py_NewRef(text));
    if ((columns = filter_shapes(module, one)) != NULL)
        result = PyTuple_Pack(3, PyList_GET_ITEM(PyTuple_GET_ITEM(columns, 0), 0),
                              PyList_GET_ITEM(PyTuple_GET_ITEM(columns, 1), 0),
                              PyList_GET_ITEM(PyTuple_GET_ITEM(columns, 2), 0));
    Py_DECREF(one);
    Py_XDECREF(columns);
    return result;
}

/* ----- watch_lists: the ε-lists and the watchers of the AFA's states (compiled.py) ----- */

/* A list of tuples of ints as int32 (offsets, items), each item in [0, n). */
static int int_lists(PyObject *lists, Py_ssize_t n, int32_t **at, int32_t **items)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        PyObject *row = PyList_GET_ITEM(lists, s);
        if (!PyTuple_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "eps: a list of tuples");
            return -1;
        }
        count += PyTuple_GET_SIZE(row);
    }
    if (count >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "eps: fewer than 2**31 items");
        return -1;
    }
    *at = PyMem_Malloc((size_t)(n + 1) * sizeof(int32_t));
    *items = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(int32_t));
    if (*at == NULL || *items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        PyObject *row = PyList_GET_ITEM(lists, s);
        (*at)[s] = (int32_t)k;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(row); i++) {
            long t = PyLong_AsLong(PyTuple_GET_ITEM(row, i));
            if (t < 0 || t >= n) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "eps: a state out of range");
                return -1;
            }
            (*items)[k++] = (int32_t)t;
        }
    }
    (*at)[n] = (int32_t)k;
    return 0;
}

/* compiled.py's _watchers (the reference, which says why), with the ε-lists, both as the
 * kernel reads them: ((offsets, items), (offsets, items)) of int32 bytes. An OR or NOT
 * state is watched through every successor, an AND through one: not a NOT if it has
 * another, one that tests values (or leads to a state that does) if any, then the least
 * shared, then the highest numbered. */
static PyObject *watch_lists(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer kind, values;
    PyObject *eps, *targets, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*O!O!y*", &kind, &PyList_Type, &eps, &PyList_Type, &targets,
                          &values))
        return NULL;
    Py_ssize_t n = kind.len;
    int32_t *at = NULL, *items = NULL, *fan_in = NULL, *chosen = NULL, *watch_at = NULL,
            *watch = NULL;
    uint8_t *tests = NULL;
    if (PyList_GET_SIZE(eps) < n || PyList_GET_SIZE(targets) < n || values.len < n ||
        n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "watch_lists: a list entry and a value per state");
        goto out;
    }
    if (int_lists(eps, n, &at, &items) < 0)
        goto out;
    fan_in = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    chosen = PyMem_Malloc(((size_t)n + 1) * sizeof(int32_t));
    watch_at = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    tests = PyMem_Malloc((size_t)n + 1);
    if (fan_in == NULL || chosen == NULL || watch_at == NULL || tests == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (n)
        memcpy(tests, values.buf, (size_t)n);
    const uint8_t *kinds = kind.buf;
    for (Py_ssize_t s = 0; s < n; s++) { /* in order: successors come first, but loops */
        for (int32_t i = at[s]; i < at[s + 1]; i++)
            fan_in[items[i]]++;
        PyObject *target = PyList_GET_ITEM(targets, s);
        if (target != Py_None) {
            long t = PyLong_AsLong(target);
            if (t < 0 || t >= n) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "targets: a state out of range");
                goto out;
            }
            if (t != s && tests[t])
                tests[s] = 1;
        }
        for (int32_t i = at[s]; i < at[s + 1] && !tests[s]; i++)
            if (tests[items[i]])
                tests[s] = 1;
    }
    for (Py_ssize_t s = 0; s < n; s++) { /* count each state's watchers */
        chosen[s] = -1;
        if (at[s] == at[s + 1])
            continue;
        if (kinds[s] != AND) {
            for (int32_t i = at[s]; i < at[s + 1]; i++)
                watch_at[items[i] + 1]++;
            continue;
        }
        int32_t best = items[at[s]];
        for (int32_t i = at[s] + 1; i < at[s + 1]; i++) {
            int32_t t = items[i];
            int negated = kinds[t] == NOT, best_negated = kinds[best] == NOT;
            if (negated != best_negated  ? best_negated
                : tests[t] != tests[best]   ? tests[t] > tests[best]
                : fan_in[t] != fan_in[best] ? fan_in[t] < fan_in[best]
                                            : t > best)
                best = t;
        }
        chosen[s] = best;
        watch_at[best + 1]++;
    }
    for (Py_ssize_t t = 0; t < n; t++)
        watch_at[t + 1] += watch_at[t];
    watch = PyMem_Malloc((size_t)(watch_at[n] ? watch_at[n] : 1) * sizeof(int32_t));
    if (watch == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    memset(fan_in, 0, (size_t)n * sizeof(int32_t)); /* now: watchers placed per state */
    for (Py_ssize_t s = 0; s < n; s++) { /* in increasing order, as the reference lists them */
        if (chosen[s] >= 0) {
            watch[watch_at[chosen[s]] + fan_in[chosen[s]]++] = (int32_t)s;
            continue;
        }
        for (int32_t i = at[s]; i < at[s + 1]; i++)
            watch[watch_at[items[i]] + fan_in[items[i]]++] = (int32_t)s;
    }
    result = Py_BuildValue("(y#y#)(y#y#)", (const char *)at, (Py_ssize_t)(4 * (n + 1)),
                           (const char *)items, (Py_ssize_t)(4 * at[n]), (const char *)watch_at,
                           (Py_ssize_t)(4 * (n + 1)), (const char *)watch,
                           (Py_ssize_t)(4 * watch_at[n]));
out:
    PyBuffer_Release(&kind);
    PyBuffer_Release(&values);
    PyMem_Free(at);
    PyMem_Free(items);
    PyMem_Free(fan_in);
    PyMem_Free(chosen);
    PyMem_Free(watch_at);
    PyMem_Free(watch);
    PyMem_Free(tests);
    return result;
}

static PyMethodDef module_methods[] = {
    {"filter_tokens", filter_tokens, METH_VARARGS,
     "filter_tokens(text, token) -> the tokens of a filter (parser.tokenize's), or None where "
     "a character starts no token"},
    {"read_plan", read_plan, METH_O,
     "read_plan(text) -> (head, atoms, formula) of a filter of the counted form (counted_plans.py's "
     "Plan), read straight from its text; None for any other filter (plan_reader.c)"},
    {"filter_shapes", filter_shapes, METH_O,
     "filter_shapes(texts) -> (shapes, constants, names): filter_shape of each text of a "
     "list, as three lists"},
    {"filter_shape", filter_shape, METH_O,
     "filter_shape(text) -> (shape, constants, names): workload.py's _shape, the text cut "
     "at its string constants, numbers and names, in C"},
    {"replay", replay, METH_VARARGS,
     "replay((kind, eps, label, target, predicate, shared, Predicate), codes, root, early, "
     "constants, names, owner) -> (root state, early state or None): a filter's program "
     "(afa.py: Program.codes) replayed into an AFA's lists and shared-state table, as "
     "AFA.add_program does it in Python"},
    {"watch_lists", watch_lists, METH_VARARGS,
     "watch_lists(kind, eps, targets, values) -> ((offsets, items), (offsets, items)): the "
     "AFA's ε-lists and its states' watchers (compiled.py: _watchers) as int32 bytes; values: "
     "a byte per state, 1 where its predicate tests values"},
    {"plan_counted", plan_counted, METH_VARARGS,
     "plan_counted(templates, constants, names, ranks, labels, tests, costs, sub_test) -> "
     "(children, head_of, is_element, atom_head, atom_tests, constants, exists, values, "
     "postings, code, defaults, head_defaults, groups): counted filters planned "
     "(counting.CountedFilters)"},
    {"merge_ranks", merge_ranks, METH_VARARGS,
     "merge_ranks(a, b) -> bytes: two ascending int32 arrays (bytes) merged"},
    {"json_list", json_list, METH_VARARGS,
     "json_list(ranks, slots, texts, ascii, widest, more=None) -> str: the JSON list of the ids "
     "of ranks (int32 bytes) and of more (merged: both ascending); slots: every id as JSON text "
     "(UTF-8) in 16 bytes, or where it is in texts (json_slots'); ascii: the ids are ASCII; "
     "widest: the longest id's text"},
    {"json_slots", json_slots, METH_VARARGS,
     "json_slots(texts, ends) -> bytes: ids as JSON text (UTF-8) one after the other in texts, "
     "id r ending at ends[r] (int64 bytes), as json_list's 16-byte slots"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_states", "The compiled core of the XPush machine.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__states(void)
{
    if (PyType_Ready(&SetStoreType) < 0 || PyType_Ready(&StateKernelType) < 0 ||
        PyType_Ready(&TableViewType) < 0 || PyType_Ready(&ValueIndexType) < 0 ||
        PyType_Ready(&TextMatcherType) < 0 || PyType_Ready(&CounterType) < 0)
        return NULL;
    const char *words[] = {"true", "false", "leaf", "step", "loop", "loop-or-text", "and", "or",
                           "not", "*", "#text"};
    PyObject **slots[] = {&s_true, &s_false, &s_leaf, &s_step, &s_loop, &s_loop_or_text,
                          &s_and, &s_or, &s_not, &s_star, &s_text};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if ((*slots[i] = PyUnicode_InternFromString(words[i])) == NULL)
            return NULL;
    if ((s_empty = PyTuple_New(0)) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "StateKernel", (PyObject *)&StateKernelType) < 0 ||
        PyModule_AddObjectRef(m, "SetStore", (PyObject *)&SetStoreType) < 0 ||
        PyModule_AddObjectRef(m, "ValueIndex", (PyObject *)&ValueIndexType) < 0 ||
        PyModule_AddObjectRef(m, "TextMatcher", (PyObject *)&TextMatcherType) < 0 ||
        PyModule_AddObjectRef(m, "Counter", (PyObject *)&CounterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

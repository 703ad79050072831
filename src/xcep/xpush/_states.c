/* The compiled core of the XPush machine (machine.py: run, _eval, _pop, _add, _accept, _answer).
 *
 * A StateKernel holds a workload's AFA as flat arrays (the kind of each state;
 * per state its ε-successors, its watchers and the filters it proves as an
 * early or an initial state, each as offsets + items), the machine's back
 * table (state -> {label: states stepping into it}, flattened the same way,
 * labels by id) and the order optimization's preconditions. It owns the
 * machine's interned sets of AFA states (`states`, a SetStore of sorted int32
 * arrays with a hash table), known by their ids: the top-down and bottom-up
 * machine states, and the early and initial states that prove filters. On
 * those ids it computes what the Python methods compute on frozensets
 * (XPushMachine._eval, _pop, _add, _accept, _answer):
 *
 *   eval_pop(bases, qt, label, parent_qt) -> (up, proven)
 *       eval(q) at a node with top-down state qt, then t_pop: the parent's
 *       states the matched ones complete, and the early states matched (they
 *       prove their filters), both interned;
 *   add(left, right) -> the union (t_add^b), less what the order optimization drops;
 *   accept(bases, qt) -> the initial and early states matched at the document node;
 *   answer(found, proven) -> a document's answer: the ranks of the filters its
 *       accepted and proven states prove (ids_of makes the list of their ids);
 *   walk(...) -> the table walk: the machine's dict tables followed over a
 *       document's events in C, the missing close and add entries computed here
 *       and stored, the other misses (push, leaf, element values: they need the
 *       predicate index) computed by the Python methods it is given.
 *
 * Filters are their ranks (position in ascending id order). bases is a tuple of
 * set ids or iterables of states (their union is the base). A top-down state's
 * enabled states are kept as a bitmap, built once per state; membership uses
 * arrays of stamps (one generation per call), so a call costs time in what it
 * touches, not in the size of the AFA.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

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


/* Sort the items in `v` (all in [0, 64 * words of `bits`)) and drop the repeated ones.
 * Already in order (often: one state's filters) costs one pass; few items: insertion
 * sort; many over a narrow range: `bits`, a zeroed bitmap, set and read back over the
 * words the items touch (and left zeroed); many over a wide range: Shell sort. */
static void sort_unique(IntVec *v, uint64_t *bits)
{
    int32_t *d = v->data;
    Py_ssize_t n = v->len, kept = 0, ordered = 1;
    for (Py_ssize_t i = 1; i < n && ordered; i++)
        ordered = d[i - 1] < d[i];
    if (ordered)
        return;
    int32_t low = d[0], high = d[0];
    for (Py_ssize_t i = 1; i < n; i++) {
        low = d[i] < low ? d[i] : low;
        high = d[i] > high ? d[i] : high;
    }
    if (n >= 48 && (high >> 6) - (low >> 6) <= 8 * n) {
        for (Py_ssize_t i = 0; i < n; i++)
            bits[d[i] >> 6] |= (uint64_t)1 << (d[i] & 63);
        for (int32_t w = low >> 6; w <= high >> 6; w++) {
            for (uint64_t b = bits[w]; b; b &= b - 1)
                d[kept++] = (w << 6) + __builtin_ctzll(b);
            bits[w] = 0;
        }
        v->len = kept;
        return;
    }
    static const Py_ssize_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = n < 48 ? 7 : 0; g < sizeof gaps / sizeof *gaps; g++)
        for (Py_ssize_t gap = gaps[g], i = gap; i < n; i++) {
            int32_t x = d[i];
            Py_ssize_t j = i;
            for (; j >= gap && d[j - gap] > x; j -= gap)
                d[j] = d[j - gap];
            d[j] = x;
        }
    for (Py_ssize_t i = 0; i < n; i++)
        if (kept == 0 || d[i] != d[kept - 1])
            d[kept++] = d[i];
    v->len = kept;
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
    if (!(st->bits = PyMem_Calloc((size_t)limit / 64 + 1, sizeof(uint64_t)))) {
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
        sort_unique(&v, st->bits);
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
} TopDown;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, nfilters;
    uint8_t *kind, *true_leaf;
    Lists eps, watch;     /* ε-successors; watchers (see XPushMachine._eval) */
    Lists early, initial; /* the filters (their ranks) an early / initial state proves */
    /* the order optimization: the precondition sets of a state (XPushMachine._add), as
     * set numbers; the states of each set */
    Lists prec, prec_sets;
    int has_prec;
    /* the back table, state -> {label: states stepping into it}: the entries of state s
     * are back_at[s] .. back_at[s + 1]; entry e is for label id back_label[e] (ids from
     * the labels dict) and its states are back_states' items of e */
    int32_t *back_at, *back_label;
    Lists back_states;
    PyObject *labels;
    int32_t star, attr_star; /* the label ids of * and @* (-1: nothing steps on them) */
    SetStore *states;
    TopDown *topdown; /* by id of the top-down state */
    Py_ssize_t topdown_count, held;
    Py_ssize_t closing; /* the top-down state of the element make_close closes */
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
    }
    PyMem_Free(self->topdown);
    self->topdown = NULL;
    self->topdown_count = 0;
}

static void kernel_dealloc(StateKernel *self)
{
    Lists *lists[] = {&self->eps,  &self->watch,     &self->early,      &self->initial,
                      &self->prec, &self->prec_sets, &self->back_states};
    for (size_t k = 0; k < sizeof lists / sizeof *lists; k++) {
        PyMem_Free(lists[k]->at);
        PyMem_Free(lists[k]->items);
    }
    IntVec *vecs[] = {&self->all_extras, &self->list, &self->up, &self->found};
    for (size_t k = 0; k < sizeof vecs / sizeof *vecs; k++)
        PyMem_Free(vecs[k]->data);
    free_topdown(self);
    PyMem_Free(self->kind);
    PyMem_Free(self->true_leaf);
    PyMem_Free(self->matched);
    PyMem_Free(self->decided);
    PyMem_Free(self->seen);
    PyMem_Free(self->state_bits);
    PyMem_Free(self->queue.bits);
    PyMem_Free(self->queue.summary);
    PyMem_Free(self->filter_bits);
    PyMem_Free(self->back_at);
    PyMem_Free(self->back_label);
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

/* The back table (a list: state -> {label: tuple of states} or None) as flat arrays. */
static int load_back(StateKernel *self, PyObject *back)
{
    Py_ssize_t n = self->n, entries = 0, states = 0, pos;
    PyObject *label, *targets;
    if (!(self->labels = PyDict_New()))
        return -1;
    for (Py_ssize_t s = 0; s < n; s++) {
        PyObject *by_label = PyList_GET_ITEM(back, s);
        if (by_label == Py_None)
            continue;
        if (!PyDict_Check(by_label)) {
            PyErr_SetString(PyExc_TypeError, "back: a dict or None per state");
            return -1;
        }
        for (pos = 0; PyDict_Next(by_label, &pos, &label, &targets);) {
            if (!PyUnicode_Check(label) || !PyTuple_Check(targets)) {
                PyErr_SetString(PyExc_TypeError, "back: {label: tuple of states}");
                return -1;
            }
            entries++;
            states += PyTuple_GET_SIZE(targets);
        }
    }
    if (entries >= INT32_MAX || states >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "back: too many entries");
        return -1;
    }
    self->back_at = PyMem_Malloc((size_t)(n + 1) * sizeof(int32_t));
    self->back_label = PyMem_Malloc((size_t)(entries ? entries : 1) * sizeof(int32_t));
    self->back_states.at = PyMem_Malloc((size_t)(entries + 1) * sizeof(int32_t));
    self->back_states.items = PyMem_Malloc((size_t)(states ? states : 1) * sizeof(int32_t));
    if (!self->back_at || !self->back_label || !self->back_states.at || !self->back_states.items) {
        PyErr_NoMemory();
        return -1;
    }
    int32_t e = 0, k = 0;
    for (Py_ssize_t s = 0; s < n; s++) {
        self->back_at[s] = e;
        PyObject *by_label = PyList_GET_ITEM(back, s);
        if (by_label == Py_None)
            continue;
        for (pos = 0; PyDict_Next(by_label, &pos, &label, &targets); e++) {
            self->back_states.at[e] = k;
            if ((self->back_label[e] = label_id(self, label, 1)) < 0)
                return -1;
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(targets); i++) {
                Py_ssize_t t = index_of(PyTuple_GET_ITEM(targets, i), n, PyExc_ValueError, "state");
                if (t < 0)
                    return -1;
                self->back_states.items[k++] = (int32_t)t;
            }
        }
    }
    self->back_at[n] = e;
    self->back_states.at[e] = k;
    return 0;
}

/* Forget every interned set (the machine's flush). */
static void clear_sets(StateKernel *self)
{
    store_clear(self->states);
    free_topdown(self);
    self->held = 0;
}

static PyObject *kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"kind",    "true_leaves", "eps",  "watchers", "early",
                               "initial", "filters",     "back", "prec",     NULL};
    Py_buffer kind, trues;
    Py_ssize_t filters;
    PyObject *eps, *watchers, *early, *initial, *back, *prec = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*OOOOnO!|O", keywords, &kind, &trues,
                                     &eps, &watchers, &early, &initial, &filters, &PyList_Type,
                                     &back, &prec))
        return NULL;
    StateKernel *self = (StateKernel *)type->tp_alloc(type, 0);
    Py_ssize_t n = kind.len;
    if (self == NULL)
        goto done;
    self->n = n;
    self->nfilters = filters;
    if (PyList_GET_SIZE(back) != n || n >= INT32_MAX || filters < 0 || filters >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "back: one entry per state (fewer than 2**31)");
        goto fail;
    }
    if (!(self->kind = copy_buffer(&kind, n, 1, "kind")) ||
        load_lists(&self->eps, eps, n, n, "eps") < 0 ||
        load_lists(&self->watch, watchers, n, n, "watchers") < 0 ||
        load_lists(&self->early, early, n, filters, "early") < 0 ||
        load_lists(&self->initial, initial, n, filters, "initial") < 0 ||
        load_back(self, back) < 0)
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
    for (Py_ssize_t s = 0; s < n; s++)
        if (self->kind[s] > NOT || (self->kind[s] == NOT && self->eps.at[s + 1] == self->eps.at[s])) {
            PyErr_SetString(PyExc_ValueError, "kind: OR, AND or NOT (with a successor)");
            goto fail;
        }
    if (!(self->true_leaf = PyMem_Calloc(n ? (size_t)n : 1, 1)))
        goto nomemory;
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
        self->true_leaf[true_states[i]] = 1;
    }
    for (int32_t s = 0; s < n; s++)
        if (self->true_leaf[s] && vec_push(&self->all_extras, s) < 0)
            goto fail;
    self->all_ntrue = (int32_t)self->all_extras.len;
    for (int32_t s = 0; s < n; s++)
        if (self->kind[s] == NOT && vec_push(&self->all_extras, s) < 0)
            goto fail;
    uint8_t **stamps[] = {&self->matched, &self->decided, &self->seen};
    for (size_t k = 0; k < sizeof stamps / sizeof *stamps; k++)
        if (!(*stamps[k] = PyMem_Calloc(n ? (size_t)n : 1, 1)))
            goto nomemory;
    if (!(self->state_bits = PyMem_Calloc((size_t)n / 64 + 1, sizeof(uint64_t))) ||
        !(self->queue.bits = PyMem_Calloc((size_t)n / 64 + 2, sizeof(uint64_t))) ||
        !(self->queue.summary = PyMem_Calloc((size_t)n / 4096 + 2, sizeof(uint64_t))) ||
        !(self->filter_bits = PyMem_Calloc((size_t)filters / 64 + 1, sizeof(uint64_t))))
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
    if (PyErr_Occurred() || !(self->states = store_new((int32_t)n)))
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
        ntrue += self->true_leaf[x[i]];
        nnot += self->kind[x[i]] == NOT;
    }
    if (!(td->bits = PyMem_Calloc(bytes ? bytes : 1, 1)) ||
        !(td->extras = PyMem_Malloc((size_t)(ntrue + nnot + 1) * sizeof(int32_t))))
        return PyErr_NoMemory(), NULL;
    td->ntrue = td->nnot = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        td->bits[x[i] >> 3] |= (uint8_t)(1 << (x[i] & 7));
        if (self->true_leaf[x[i]])
            td->extras[td->ntrue++] = x[i];
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (self->kind[x[i]] == NOT)
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

static inline void queue_watchers(StateKernel *self, int32_t s)
{
    for (int32_t i = self->watch.at[s]; i < self->watch.at[s + 1]; i++)
        queue_put(&self->queue, self->watch.items[i]);
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
        const int32_t *first = self->eps.items + self->eps.at[s];
        const int32_t *end = self->eps.items + self->eps.at[s + 1];
        int ok;
        if (self->kind[s] == AND) {
            ok = 1;
            for (const int32_t *t = first; t < end && ok; t++)
                ok = matched[*t] == gen;
        } else if (self->kind[s] == OR) {
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
    Py_ssize_t count = lists->at[s + 1] - lists->at[s];
    if (count == 0 || vec_reserve(out, count) < 0)
        return count == 0 ? 0 : -1;
    memcpy(out->data + out->len, lists->items + lists->at[s], (size_t)count * sizeof(int32_t));
    out->len += count;
    return 0;
}

/* Add the states of back table entry e to self->up (those enabled at the parent). */
static int step_up(StateKernel *self, int32_t e, const uint8_t *parent_enabled)
{
    uint8_t gen = self->gen;
    for (int32_t i = self->back_states.at[e]; i < self->back_states.at[e + 1]; i++) {
        int32_t t = self->back_states.items[i];
        if (!has(parent_enabled, t) || self->seen[t] == gen)
            continue;
        self->seen[t] = gen;
        if (vec_push(&self->up, t) < 0)
            return -1;
    }
    return 0;
}

/* eval at a node with top-down state qt (over the base added since eval_begin), then
 * t_pop to its parent: the ids of the parent's new states and of the early states matched. */
static int eval_pop(StateKernel *self, Py_ssize_t qt, PyObject *label, Py_ssize_t parent_qt,
                    Py_ssize_t *up_id, Py_ssize_t *proven_id)
{
    TopDown *td = topdown_of(self, qt);
    if (td == NULL || eval_run(self, td) < 0 || (td = topdown_of(self, parent_qt)) == NULL)
        return -1;
    const uint8_t *parent_enabled = td->all ? NULL : td->bits;
    int32_t exact = label_id(self, label, 0), loose = -1; /* -1: no state steps on it */
    if (exact < 0 && PyErr_Occurred())
        return -1;
    Py_UCS4 first = PyUnicode_GET_LENGTH(label) ? PyUnicode_READ_CHAR(label, 0) : '#';
    loose = first == '@' ? self->attr_star : first == '#' ? -1 : self->star;
    self->up.len = 0;
    self->found.len = 0;
    for (Py_ssize_t i = 0; i < self->list.len; i++) {
        int32_t s = self->list.data[i];
        if (self->early.at[s + 1] > self->early.at[s]) { /* an early state: proves, goes no higher */
            if (vec_push(&self->found, s) < 0)
                return -1;
            continue;
        }
        for (int32_t e = self->back_at[s]; e < self->back_at[s + 1]; e++)
            if ((self->back_label[e] == exact || self->back_label[e] == loose) &&
                step_up(self, e, parent_enabled) < 0)
                return -1;
    }
    sort_unique(&self->up, self->state_bits);
    sort_unique(&self->found, self->state_bits);
    /* in the order of XPushMachine._pop: the proven states first */
    if ((*proven_id = store_intern(self->states, self->found.data, self->found.len)) < 0 ||
        (*up_id = store_intern(self->states, self->up.data, self->up.len)) < 0)
        return -1;
    return 0;
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
            if (self->has_prec && x >= 0 && self->prec.at[x + 1] > self->prec.at[x]) {
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
        if ((self->initial.at[s + 1] > self->initial.at[s] || self->early.at[s + 1] > self->early.at[s]) &&
            vec_push(&self->found, s) < 0)
            return -1;
    }
    sort_unique(&self->found, self->state_bits);
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
    if (!PyArg_ParseTuple(args, "O!nUn", &PyTuple_Type, &bases, &qt, &label, &parent_qt) ||
        eval_bases(self, bases) < 0 || eval_pop(self, qt, label, parent_qt, &up, &proven) < 0)
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

static PyObject *kernel_add(StateKernel *self, PyObject *args)
{
    PyObject *left, *right;
    Py_ssize_t l, r, sum;
    if (!PyArg_ParseTuple(args, "OO", &left, &right) || (l = store_id(self->states, left)) < 0 ||
        (r = store_id(self->states, right)) < 0 || (sum = add_sets(self, l, r)) < 0)
        return NULL;
    return PyLong_FromSsize_t(sum);
}

/* A document's answer: the ranks of the filters proven by the states found at the
 * document node (initial and early) and proven on the way (early: a tuple of sets), all
 * interned sets; sorted, as bytes of native int32. */
static PyObject *kernel_answer(StateKernel *self, PyObject *args)
{
    PyObject *found, *proven;
    if (!PyArg_ParseTuple(args, "OO!", &found, &PyTuple_Type, &proven))
        return NULL;
    next_generation(self); /* seen: early states already counted */
    self->found.len = 0;
    for (Py_ssize_t k = -1; k < PyTuple_GET_SIZE(proven); k++) {
        Py_ssize_t set = store_id(self->states, k < 0 ? found : PyTuple_GET_ITEM(proven, k)), count;
        if (set < 0)
            return NULL;
        const int32_t *x = store_items(self->states, set, &count);
        for (Py_ssize_t i = 0; i < count; i++) {
            if (x[i] < 0 || self->seen[x[i]] == self->gen)
                continue;
            self->seen[x[i]] = self->gen;
            if ((k < 0 && append_items(&self->initial, x[i], &self->found) < 0) ||
                append_items(&self->early, x[i], &self->found) < 0)
                return NULL;
        }
    }
    sort_unique(&self->found, self->filter_bits);
    return PyBytes_FromStringAndSize((const char *)self->found.data,
                                     self->found.len * (Py_ssize_t)sizeof(int32_t));
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
    for (Py_ssize_t i = 0; out != NULL && i < count; i++)
        PyList_SET_ITEM(out, i, Py_NewRef(PyList_GET_ITEM(ids, rank[i])));
done:
    PyBuffer_Release(&ranks);
    return out;
}

static PyObject *kernel_clear(StateKernel *self, PyObject *unused)
{
    (void)unused;
    clear_sets(self);
    Py_RETURN_NONE;
}

/* ----- The table walk ----- */

/* table[(a, b)] or NULL (borrowed) with no exception; NULL with one on failure. */
static PyObject *get2(PyObject *table, PyObject *a, PyObject *b)
{
    PyObject *key = PyTuple_Pack(2, a, b);
    if (key == NULL)
        return NULL;
    PyObject *value = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    return value;
}

/* An entry (popped, notes) of the leaf or close table, checked. */
static int unpack(PyObject *entry, PyObject **popped, PyObject **notes)
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "a table entry must be (popped, notes)");
        return -1;
    }
    *popped = PyTuple_GET_ITEM(entry, 0);
    *notes = PyTuple_GET_ITEM(entry, 1);
    return 0;
}

/* The value states of an element's string value: values[qt] is False (no
 * filter compares this element's value), or a dict text -> states. */
static PyObject *value_states(PyObject *table, PyObject *qt, PyObject *text, PyObject *empty)
{
    PyObject *by_text = PyDict_GetItemWithError(table, qt);
    if (by_text == NULL)
        return NULL;
    if (by_text == Py_False)
        return empty;
    if (!PyDict_Check(by_text))
        return NULL;
    return PyDict_GetItemWithError(by_text, text);
}

/* table[key] as a new reference; when missing, made by `make` and stored. */
static PyObject *entry_of(PyObject *table, PyObject *key, PyObject *(*make)(StateKernel *, PyObject *),
                          StateKernel *self, Py_ssize_t *computed)
{
    PyObject *entry = PyDict_GetItemWithError(table, key);
    if (entry != NULL)
        return Py_NewRef(entry);
    if (PyErr_Occurred() || (entry = make(self, key)) == NULL)
        return NULL;
    if (PyDict_SetItem(table, key, entry) < 0) {
        Py_DECREF(entry);
        return NULL;
    }
    ++*computed;
    return entry;
}

/* A missing add entry: key (left, right) -> the id of their t_add^b. */
static PyObject *make_add(StateKernel *self, PyObject *key)
{
    Py_ssize_t left = store_id(self->states, PyTuple_GET_ITEM(key, 0)), right, sum;
    if (left < 0 || (right = store_id(self->states, PyTuple_GET_ITEM(key, 1))) < 0 ||
        (sum = add_sets(self, left, right)) < 0)
        return NULL;
    return PyLong_FromSsize_t(sum);
}

/* A missing close entry: key (parent_qt, qb, vq, label), with the closing element's qt
 * in self->closing -> (up, proven) of eval_pop on the base qb | vq. */
static PyObject *make_close(StateKernel *self, PyObject *key)
{
    Py_ssize_t parent_qt = store_id(self->states, PyTuple_GET_ITEM(key, 0)), up, proven;
    if (parent_qt < 0)
        return NULL;
    eval_begin(self);
    if (eval_base_object(self, PyTuple_GET_ITEM(key, 1)) < 0 ||
        eval_base_object(self, PyTuple_GET_ITEM(key, 2)) < 0 ||
        eval_pop(self, self->closing, PyTuple_GET_ITEM(key, 3), parent_qt, &up, &proven) < 0)
        return NULL;
    return Py_BuildValue("(nn)", up, proven);
}

/* An entry of the add table as a new reference, computed here when missing; adding the
 * empty state (empty) is the identity and needs no entry. */
static PyObject *add_entry(StateKernel *self, PyObject *add, PyObject *left, PyObject *right,
                           PyObject *empty, Py_ssize_t *computed)
{
    int same = right == empty ? 1 : PyObject_RichCompareBool(right, empty, Py_EQ);
    if (same)
        return same < 0 ? NULL : Py_NewRef(left);
    PyObject *key = PyTuple_Pack(2, left, right);
    if (key == NULL)
        return NULL;
    PyObject *sum = entry_of(add, key, make_add, self, computed);
    Py_DECREF(key);
    return sum;
}

/* Append notes (an interned set of filters, 0 for none) to the document's proven list. */
static int note(PyObject *proven, PyObject *notes)
{
    int proves = PyObject_IsTrue(notes);
    return proves < 0 || (proves && PyList_Append(proven, notes) < 0) ? -1 : 0;
}

static PyObject *kernel_walk(StateKernel *self, PyObject *args)
{
    Py_buffer docs, kinds, names;
    PyObject *values, *elem_labels, *attr_labels, *text_label, *push, *leaf, *close, *add;
    PyObject *element_values, *texts, *empty, *stack, *proven, *qt, *qb;
    PyObject *push_miss, *leaf_miss, *values_miss;
    long long doc;
    Py_ssize_t i, n, computed = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*O!LnnO!O!UO!O!O!O!OOOO!O!OO(OOO):walk", &docs, &kinds,
                          &names, &PyList_Type, &values, &doc, &i, &n, &PyList_Type, &elem_labels,
                          &PyList_Type, &attr_labels, &text_label, &PyDict_Type, &push,
                          &PyDict_Type, &leaf, &PyDict_Type, &close, &PyDict_Type, &add,
                          &element_values, &texts, &empty, &PyList_Type, &stack, &PyList_Type,
                          &proven, &qt, &qb, &push_miss, &leaf_miss, &values_miss))
        return NULL;
    /* element values: texts is the list of text parts of each open element, and
     * element_values the values table; both None when no filter compares one */
    int with_values = texts != Py_None;
    PyObject *result = NULL;
    const long long *doc_of = docs.buf;
    const unsigned char *kind_of = kinds.buf;
    const int *name_of = names.buf;
    Py_ssize_t count = kinds.len;
    if (with_values && (!PyList_Check(texts) || !PyDict_Check(element_values))) {
        PyErr_SetString(PyExc_TypeError, "texts must be a list and values a dict");
        goto out;
    }
    if (docs.itemsize != 8 || names.itemsize != 4 || docs.len / 8 != count ||
        names.len / 4 != count || PyList_GET_SIZE(values) != count || i < 0 || n > count) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths or types");
        goto out;
    }
    Py_INCREF(qt);
    Py_INCREF(qb);
    for (; i < n; i++) {
        if (doc_of[i] != doc)
            break;
        int kind = kind_of[i];
        int name = name_of[i];
        if (kind == OPEN) {
            if (name < 0 || name >= PyList_GET_SIZE(elem_labels))
                break;
            PyObject *label = PyList_GET_ITEM(elem_labels, name);
            PyObject *child = get2(push, qt, label);
            if (child != NULL)
                Py_INCREF(child);
            else if (PyErr_Occurred() ||
                     (child = PyObject_CallFunctionObjArgs(push_miss, qt, label, NULL)) == NULL)
                goto fail;
            PyObject *frame = PyTuple_Pack(2, qt, qb);
            if (frame == NULL || PyList_Append(stack, frame) < 0) {
                Py_XDECREF(frame);
                Py_DECREF(child);
                goto fail;
            }
            Py_DECREF(frame);
            if (with_values) {
                PyObject *parts = PyList_New(0);
                if (parts == NULL || PyList_Append(texts, parts) < 0) {
                    Py_XDECREF(parts);
                    Py_DECREF(child);
                    goto fail;
                }
                Py_DECREF(parts);
            }
            Py_SETREF(qt, child);
            Py_SETREF(qb, Py_NewRef(empty));
        } else if (kind == CLOSE) {
            Py_ssize_t depth = PyList_GET_SIZE(stack);
            if (depth < 2 || name < 0 || name >= PyList_GET_SIZE(elem_labels))
                break; /* the root closes: the Python code answers the document */
            if (with_values && PyList_GET_SIZE(texts) < 2)
                break;
            PyObject *frame = Py_NewRef(PyList_GET_ITEM(stack, depth - 1));
            PyObject *parent_qt = PyTuple_GET_ITEM(frame, 0), *parent_qb = PyTuple_GET_ITEM(frame, 1);
            PyObject *vq = Py_NewRef(empty), *text = NULL, *entry = NULL, *sum = NULL, *key = NULL;
            PyObject *popped, *notes;
            if (with_values) {
                PyObject *separator = PyUnicode_FromStringAndSize("", 0);
                text = separator == NULL ? NULL
                                         : PyUnicode_Join(separator, PyList_GET_ITEM(texts, PyList_GET_SIZE(texts) - 1));
                Py_XDECREF(separator);
                if (text == NULL)
                    goto close_failed;
                PyObject *found = value_states(element_values, qt, text, empty);
                if (found != NULL)
                    Py_SETREF(vq, Py_NewRef(found));
                else if (PyErr_Occurred())
                    goto close_failed;
                else {
                    found = PyObject_CallFunctionObjArgs(values_miss, qt, text, NULL);
                    if (found == NULL)
                        goto close_failed;
                    Py_SETREF(vq, found);
                }
            }
            key = PyTuple_Pack(4, parent_qt, qb, vq, PyList_GET_ITEM(elem_labels, name));
            if (key == NULL || (self->closing = store_id(self->states, qt)) < 0 ||
                (entry = entry_of(close, key, make_close, self, &computed)) == NULL ||
                unpack(entry, &popped, &notes) < 0 ||
                (sum = add_entry(self, add, parent_qb, popped, empty, &computed)) == NULL)
                goto close_failed;
            if (with_values) { /* the element's value joins its parent's */
                Py_ssize_t open = PyList_GET_SIZE(texts);
                if (PyList_Append(PyList_GET_ITEM(texts, open - 2), text) < 0 ||
                    PyList_SetSlice(texts, open - 1, open, NULL) < 0)
                    goto close_failed;
            }
            if (note(proven, notes) < 0)
                goto close_failed;
            Py_SETREF(qt, Py_NewRef(parent_qt));
            Py_SETREF(qb, sum);
            sum = NULL;
            if (PyList_SetSlice(stack, depth - 1, depth, NULL) < 0)
                goto close_failed;
            Py_DECREF(frame);
            Py_DECREF(vq);
            Py_XDECREF(text);
            Py_DECREF(key);
            Py_DECREF(entry);
            continue;
        close_failed:
            Py_DECREF(frame);
            Py_DECREF(vq);
            Py_XDECREF(text);
            Py_XDECREF(key);
            Py_XDECREF(entry);
            Py_XDECREF(sum);
            goto fail;
        } else {
            PyObject *label, *value = PyList_GET_ITEM(values, i);
            if (kind == ATTR) {
                if (name < 0 || name >= PyList_GET_SIZE(attr_labels))
                    break;
                label = PyList_GET_ITEM(attr_labels, name);
            } else
                label = text_label;
            if (with_values && kind == TEXT) {
                Py_ssize_t open = PyList_GET_SIZE(texts);
                if (open < 1 || PyList_Append(PyList_GET_ITEM(texts, open - 1), value) < 0)
                    goto fail;
            }
            PyObject *entry = get2(leaf, qt, label);
            if (entry != NULL && PyDict_Check(entry)) /* the entry depends on the value */
                entry = value == Py_None ? NULL : PyDict_GetItemWithError(entry, value);
            if (entry != NULL)
                Py_INCREF(entry);
            else if (PyErr_Occurred() ||
                     (entry = PyObject_CallFunctionObjArgs(leaf_miss, qt, label, value, NULL)) == NULL)
                goto fail;
            PyObject *popped, *notes, *sum = NULL;
            if (unpack(entry, &popped, &notes) < 0 ||
                (sum = add_entry(self, add, qb, popped, empty, &computed)) == NULL ||
                note(proven, notes) < 0) {
                Py_DECREF(entry);
                Py_XDECREF(sum);
                goto fail;
            }
            Py_DECREF(entry);
            Py_SETREF(qb, sum);
        }
    }
    result = Py_BuildValue("nOOn", i, qt, qb, computed);
fail:
    Py_DECREF(qt);
    Py_DECREF(qb);
out:
    PyBuffer_Release(&docs);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&names);
    return result;
}

static PyMethodDef kernel_methods[] = {
    {"eval_pop", (PyCFunction)kernel_eval_pop, METH_VARARGS,
     "eval_pop(bases, qt, label, parent_qt) -> (up, proven): eval at a node with top-down "
     "state qt, then t_pop to the parent (ids of interned sets)"},
    {"add", (PyCFunction)kernel_add, METH_VARARGS,
     "add(left, right) -> the id of t_add^b of two interned sets of states"},
    {"accept", (PyCFunction)kernel_accept, METH_VARARGS,
     "accept(bases, qt) -> the id of the set of initial and early states matched at the "
     "document node (they prove their filters)"},
    {"answer", (PyCFunction)kernel_answer, METH_VARARGS,
     "answer(found, proven) -> bytes: the sorted int32 ranks of the filters proven by the "
     "initial and early states found and the early states proven (a tuple of sets)"},
    {"ids_of", (PyCFunction)kernel_ids_of, METH_VARARGS,
     "ids_of(ranks, ids) -> list: the ids (a list, by rank) of ranks (int32 bytes)"},
    {"walk", (PyCFunction)kernel_walk, METH_VARARGS,
     "walk(docs, kinds, names, values, doc, i, n, elem_labels, attr_labels, text_label, push, "
     "leaf, close, add, element_values, texts, empty, stack, proven, qt, qb, "
     "(push_miss, leaf_miss, values_miss)) -> (i, qt, qb, computed)\n\n"
     "Follow the tables over events i..n-1 of document doc, computing missing close and add "
     "entries (computed counts them) and calling the misses for the others; stop before the "
     "close of the root or another document's event."},
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

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_states", "The compiled core of the XPush machine.", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__states(void)
{
    if (PyType_Ready(&SetStoreType) < 0 || PyType_Ready(&StateKernelType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "StateKernel", (PyObject *)&StateKernelType) < 0 ||
        PyModule_AddObjectRef(m, "SetStore", (PyObject *)&SetStoreType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

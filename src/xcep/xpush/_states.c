/* State construction of the XPush machine in C (machine.py: _eval, _pop, _accept, _answer).
 *
 * A StateKernel holds a workload's AFA as flat arrays (the kind of each state;
 * per state its ε-successors, its watchers and the filters it proves as an
 * early or an initial state, each as offsets + items) and the machine's back
 * table (state -> {label: states stepping into it}, flattened the same way,
 * labels by id). It computes what the Python methods compute
 * (XPushMachine._eval, _pop, _accept), on the same sets:
 *
 *   eval_pop(bases, enabled, trues, nots, label, wildcard, parent_enabled)
 *       -> (frozenset up, bytes proven or None)
 *       eval(q), then t_pop: the parent's states that the matched states
 *       complete, and the filters that the matched early states prove;
 *   accept(bases, enabled, trues, nots) -> bytes
 *       eval at the document node, and the filters it proves;
 *   answer(sets, ids) -> tuple (a module function)
 *       the ids (a list, by rank) of the filters in the union of the sets;
 *   untrack(states) (a module function)
 *       take a frozenset of ints out of the cyclic garbage collector's view.
 *
 * Filters are their ranks (position in ascending id order); a set of filters
 * is the bytes of its sorted native int32s.
 *
 * bases is a tuple of iterables of states (their union is the base); enabled
 * and parent_enabled are the top-down states as bitmaps (bit s of byte s / 8,
 * least significant first; None: every state is enabled); trues and nots are
 * the TRUE leaves and NOT states enabled there, as int32 arrays. Membership
 * uses arrays of stamps (one generation per call), so a call costs time in
 * what it touches, not in the size of the AFA or of the top-down state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { OR = 0, AND = 1, NOT = 2 };

typedef struct {
    int32_t *data;
    Py_ssize_t len, cap;
} IntVec;

static int vec_push(IntVec *v, int32_t x)
{
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap ? 2 * v->cap : 256;
        int32_t *data = PyMem_Realloc(v->data, (size_t)cap * sizeof(int32_t));
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        v->data = data;
        v->cap = cap;
    }
    v->data[v->len++] = x;
    return 0;
}

/* The heap of states to decide: a binary min-heap in an IntVec. */
static int heap_push(IntVec *h, int32_t x)
{
    if (vec_push(h, x) < 0)
        return -1;
    Py_ssize_t i = h->len - 1;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (h->data[parent] <= x)
            break;
        h->data[i] = h->data[parent];
        i = parent;
    }
    h->data[i] = x;
    return 0;
}

static int32_t heap_pop(IntVec *h)
{
    int32_t top = h->data[0];
    int32_t last = h->data[--h->len];
    Py_ssize_t i = 0, n = h->len;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && h->data[child + 1] < h->data[child])
            child++;
        if (h->data[child] >= last)
            break;
        h->data[i] = h->data[child];
        i = child;
    }
    if (n > 0)
        h->data[i] = last;
    return top;
}

/* Lists of ints per state: the items of state s are items[at[s] .. at[s + 1]]. */
typedef struct {
    int32_t *at, *items;
} Lists;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    uint8_t *kind;
    Lists eps, watch;     /* ε-successors; watchers (see XPushMachine._eval) */
    Lists early, initial; /* the filters (their ranks) an early / initial state proves */
    /* the back table, state -> {label: states stepping into it}: the entries of state s
     * are back_at[s] .. back_at[s + 1]; entry e is for label id back_label[e] (ids from
     * the labels dict) and its states are back_states' items of e */
    int32_t *back_at, *back_label;
    Lists back_states;
    PyObject *labels;
    uint32_t gen;
    uint32_t *matched, *decided, *seen;
    IntVec list, heap, up, found; /* matched states, to decide, the parent's, filters */
} StateKernel;

static void kernel_dealloc(StateKernel *self)
{
    Lists *lists[] = {&self->eps, &self->watch, &self->early, &self->initial, &self->back_states};
    for (size_t k = 0; k < sizeof lists / sizeof *lists; k++) {
        PyMem_Free(lists[k]->at);
        PyMem_Free(lists[k]->items);
    }
    PyMem_Free(self->kind);
    PyMem_Free(self->matched);
    PyMem_Free(self->decided);
    PyMem_Free(self->seen);
    PyMem_Free(self->list.data);
    PyMem_Free(self->heap.data);
    PyMem_Free(self->up.data);
    PyMem_Free(self->found.data);
    PyMem_Free(self->back_at);
    PyMem_Free(self->back_label);
    Py_XDECREF(self->labels);
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

/* Load a pair (offsets, items) of int32 buffers for n lists: offsets from 0, not
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
    return 0;
}

/* The state an int object stands for, or -1 with an error. */
static Py_ssize_t state_of(StateKernel *self, PyObject *item)
{
    Py_ssize_t s = PyLong_AsSsize_t(item);
    if (s == -1 && PyErr_Occurred())
        return -1;
    if (s < 0 || s >= self->n) {
        PyErr_Format(PyExc_ValueError, "state %zd out of range", s);
        return -1;
    }
    return s;
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
                Py_ssize_t t = state_of(self, PyTuple_GET_ITEM(targets, i));
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

static PyObject *kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"kind", "eps", "watchers", "early", "initial", "filters", "back",
                               NULL};
    Py_buffer kind;
    Py_ssize_t filters;
    PyObject *eps, *watchers, *early, *initial, *back;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*OOOOnO!", keywords, &kind, &eps, &watchers,
                                     &early, &initial, &filters, &PyList_Type, &back))
        return NULL;
    StateKernel *self = (StateKernel *)type->tp_alloc(type, 0);
    Py_ssize_t n = kind.len;
    if (self == NULL)
        goto done;
    self->n = n;
    self->gen = 0;
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
    for (Py_ssize_t s = 0; s < n; s++)
        if (self->kind[s] > NOT || (self->kind[s] == NOT && self->eps.at[s + 1] == self->eps.at[s])) {
            PyErr_SetString(PyExc_ValueError, "kind: OR, AND or NOT (with a successor)");
            goto fail;
        }
    uint32_t **stamps[] = {&self->matched, &self->decided, &self->seen};
    for (size_t k = 0; k < sizeof stamps / sizeof *stamps; k++)
        if (!(*stamps[k] = PyMem_Calloc(n ? (size_t)n : 1, sizeof(uint32_t)))) {
            PyErr_NoMemory();
            goto fail;
        }
    goto done;
fail:
    Py_CLEAR(self);
done:
    PyBuffer_Release(&kind);
    return (PyObject *)self;
}

/* A fresh generation for the stamp arrays (cleared when the counter wraps). */
static void next_generation(StateKernel *self)
{
    if (++self->gen == 0) {
        size_t bytes = (size_t)self->n * sizeof(uint32_t);
        memset(self->matched, 0, bytes);
        memset(self->decided, 0, bytes);
        memset(self->seen, 0, bytes);
        self->gen = 1;
    }
}

/* A bitmap of the states (None: NULL), checked to cover them all; -1 with an error. */
static int bitmap(StateKernel *self, Py_buffer *buffer, const uint8_t **bits)
{
    *bits = buffer->buf;
    if (buffer->buf != NULL && buffer->len != (self->n + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "a bitmap of %zd states has %zd bytes, not %zd", self->n,
                     (self->n + 7) / 8, buffer->len);
        return -1;
    }
    return 0;
}

static inline int has(const uint8_t *bits, int32_t s)
{
    return bits == NULL || (bits[s >> 3] >> (s & 7)) & 1;
}

/* States from an int32 buffer, checked; NULL with an error. */
static const int32_t *states_in(StateKernel *self, Py_buffer *buffer, Py_ssize_t *count)
{
    const int32_t *states = buffer->buf;
    *count = buffer->len / 4;
    if (buffer->len % 4) {
        PyErr_SetString(PyExc_ValueError, "states: int32 items expected");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *count; i++)
        if (states[i] < 0 || states[i] >= self->n) {
            PyErr_Format(PyExc_ValueError, "state %d out of range", states[i]);
            return NULL;
        }
    return states;
}

/* Stamp every state of an iterable in `stamps` and append the new ones to `list`. */
static int stamp_all(StateKernel *self, PyObject *states, uint32_t *stamps, IntVec *list)
{
    PyObject *iterator = PyObject_GetIter(states);
    if (iterator == NULL)
        return -1;
    PyObject *item;
    while ((item = PyIter_Next(iterator)) != NULL) {
        Py_ssize_t s = state_of(self, item);
        Py_DECREF(item);
        if (s < 0)
            break;
        if (stamps[s] != self->gen) {
            stamps[s] = self->gen;
            if (vec_push(list, (int32_t)s) < 0)
                break;
        }
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

static int push_watchers(StateKernel *self, int32_t s)
{
    for (int32_t i = self->watch.at[s]; i < self->watch.at[s + 1]; i++)
        if (heap_push(&self->heap, self->watch.items[i]) < 0)
            return -1;
    return 0;
}

/* eval(q) into self->list; the same order of decisions as XPushMachine._eval. */
static int evaluate(StateKernel *self, PyObject *bases, Py_buffer *enabled_buffer,
                    Py_buffer *trues_buffer, Py_buffer *nots_buffer)
{
    const uint8_t *enabled;
    const int32_t *trues, *nots;
    Py_ssize_t true_count, not_count;
    if (!PyTuple_Check(bases)) {
        PyErr_SetString(PyExc_TypeError, "bases must be a tuple of sets of states");
        return -1;
    }
    if (bitmap(self, enabled_buffer, &enabled) < 0 ||
        !(trues = states_in(self, trues_buffer, &true_count)) ||
        !(nots = states_in(self, nots_buffer, &not_count)))
        return -1;
    next_generation(self);
    uint32_t gen = self->gen, *matched = self->matched, *decided = self->decided;
    self->list.len = 0;
    self->heap.len = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(bases); k++)
        if (stamp_all(self, PyTuple_GET_ITEM(bases, k), matched, &self->list) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < true_count; i++)
        if (matched[trues[i]] != gen) {
            matched[trues[i]] = gen;
            if (vec_push(&self->list, trues[i]) < 0)
                return -1;
        }
    for (Py_ssize_t i = 0; i < self->list.len; i++)
        if (push_watchers(self, self->list.data[i]) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < not_count; i++)
        if (heap_push(&self->heap, nots[i]) < 0)
            return -1;
    while (self->heap.len) {
        int32_t s = heap_pop(&self->heap);
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
            if (vec_push(&self->list, s) < 0 || push_watchers(self, s) < 0)
                return -1;
        }
    }
    return 0;
}

/* A fresh frozenset of the states in `v`, untracked (see untrack below). */
static PyObject *frozenset_of(IntVec *v)
{
    PyObject *out = PyFrozenSet_New(NULL);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < v->len; i++) {
        PyObject *state = PyLong_FromLong(v->data[i]);
        if (state == NULL || PySet_Add(out, state) < 0) {
            Py_XDECREF(state);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(state);
    }
    PyObject_GC_UnTrack(out);
    return out;
}

static int compare_ints(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sort the items in `v` and drop the repeated ones. */
static void sort_unique(IntVec *v)
{
    Py_ssize_t kept = 0;
    if (v->len)
        qsort(v->data, (size_t)v->len, sizeof(int32_t), compare_ints);
    for (Py_ssize_t i = 0; i < v->len; i++)
        if (kept == 0 || v->data[i] != v->data[kept - 1])
            v->data[kept++] = v->data[i];
    v->len = kept;
}

/* The items in `v`, sorted and unique, as the bytes of native int32s. */
static PyObject *sorted_bytes(IntVec *v)
{
    sort_unique(v);
    return PyBytes_FromStringAndSize((const char *)v->data, v->len * (Py_ssize_t)sizeof(int32_t));
}

/* Append the items of state s in `lists` to `out`. */
static int append_items(Lists *lists, int32_t s, IntVec *out)
{
    for (int32_t i = lists->at[s]; i < lists->at[s + 1]; i++)
        if (vec_push(out, lists->items[i]) < 0)
            return -1;
    return 0;
}

/* At the document node: eval, then the filters the matched initial and early states prove. */
static PyObject *kernel_accept(StateKernel *self, PyObject *args)
{
    PyObject *bases, *out = NULL;
    Py_buffer enabled, trues, nots;
    if (!PyArg_ParseTuple(args, "Oz*y*y*", &bases, &enabled, &trues, &nots))
        return NULL;
    if (evaluate(self, bases, &enabled, &trues, &nots) < 0)
        goto done;
    self->found.len = 0;
    for (Py_ssize_t i = 0; i < self->list.len; i++) {
        int32_t s = self->list.data[i];
        if (append_items(&self->initial, s, &self->found) < 0 ||
            append_items(&self->early, s, &self->found) < 0)
            goto done;
    }
    out = sorted_bytes(&self->found);
done:
    PyBuffer_Release(&enabled);
    PyBuffer_Release(&trues);
    PyBuffer_Release(&nots);
    return out;
}

/* Add the states of back table entry e to self->up (those enabled at the parent). */
static int step_up(StateKernel *self, int32_t e, const uint8_t *parent_enabled)
{
    uint32_t gen = self->gen;
    for (int32_t i = self->back_states.at[e]; i < self->back_states.at[e + 1]; i++) {
        int32_t t = self->back_states.items[i];
        if (!has(parent_enabled, t) || self->seen[t] == gen)
            continue;
        self->seen[t] = gen;
        if (vec_push(&self->up, (int32_t)t) < 0)
            return -1;
    }
    return 0;
}

/* eval, then t_pop to the parent: (frozenset up, bytes proven or None). */
static PyObject *pop(StateKernel *self, PyObject *bases, Py_buffer *enabled, Py_buffer *trues,
                     Py_buffer *nots, PyObject *label, PyObject *wildcard, Py_buffer *parent)
{
    const uint8_t *parent_enabled;
    IntVec *proven = &self->found;
    if (wildcard != Py_None && !PyUnicode_Check(wildcard)) {
        PyErr_SetString(PyExc_TypeError, "wildcard must be a str or None");
        return NULL;
    }
    if (bitmap(self, parent, &parent_enabled) < 0 || evaluate(self, bases, enabled, trues, nots) < 0)
        return NULL;
    int32_t exact = label_id(self, label, 0), loose = -1; /* -1: no state steps on it */
    if (exact < 0 && PyErr_Occurred())
        return NULL;
    if (wildcard != Py_None && (loose = label_id(self, wildcard, 0)) < 0 && PyErr_Occurred())
        return NULL;
    self->up.len = 0;
    proven->len = 0;
    for (Py_ssize_t i = 0; i < self->list.len; i++) {
        int32_t s = self->list.data[i];
        if (self->early.at[s + 1] > self->early.at[s]) { /* an early state: proves, goes no higher */
            if (append_items(&self->early, s, proven) < 0)
                return NULL;
            continue;
        }
        for (int32_t e = self->back_at[s]; e < self->back_at[s + 1]; e++)
            if ((self->back_label[e] == exact || self->back_label[e] == loose) &&
                step_up(self, e, parent_enabled) < 0)
                return NULL;
    }
    PyObject *up = frozenset_of(&self->up);
    PyObject *filters = proven->len ? sorted_bytes(proven) : Py_NewRef(Py_None);
    if (up == NULL || filters == NULL) {
        Py_XDECREF(up);
        Py_XDECREF(filters);
        return NULL;
    }
    return Py_BuildValue("(NN)", up, filters);
}

static PyObject *kernel_eval_pop(StateKernel *self, PyObject *args)
{
    PyObject *bases, *label, *wildcard, *out;
    Py_buffer enabled, trues, nots, parent;
    if (!PyArg_ParseTuple(args, "Oz*y*y*UOz*", &bases, &enabled, &trues, &nots, &label, &wildcard,
                          &parent))
        return NULL;
    out = pop(self, bases, &enabled, &trues, &nots, label, wildcard, &parent);
    PyBuffer_Release(&enabled);
    PyBuffer_Release(&trues);
    PyBuffer_Release(&nots);
    PyBuffer_Release(&parent);
    return out;
}

static PyMethodDef kernel_methods[] = {
    {"accept", (PyCFunction)kernel_accept, METH_VARARGS,
     "accept(bases, enabled, trues, nots) -> bytes\n"
     "eval at the document node; the filters its initial and early states prove"},
    {"eval_pop", (PyCFunction)kernel_eval_pop, METH_VARARGS,
     "eval_pop(bases, enabled, trues, nots, label, wildcard, parent_enabled)\n"
     "-> (frozenset up, bytes proven or None): eval, then t_pop to the parent"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StateKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.StateKernel",
    .tp_basicsize = sizeof(StateKernel),
    .tp_dealloc = (destructor)kernel_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StateKernel(kind, eps, watchers, early, initial, filters, back): eval and t_pop "
              "over a workload's AFA; eps, watchers, early and initial are (offsets, items) "
              "pairs of native int32 arrays",
    .tp_methods = kernel_methods,
    .tp_new = kernel_new,
};

/* A document's answer: the ids of the filters in the union of sets (bytes of sorted int32
 * ranks), in rank order. */
static PyObject *answer(PyObject *module, PyObject *args)
{
    PyObject *sets, *ids, *out = NULL;
    IntVec ranks = {NULL, 0, 0};
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &sets, &PyList_Type, &ids))
        return NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(sets); k++) {
        PyObject *set = PyTuple_GET_ITEM(sets, k);
        if (!PyBytes_Check(set) || PyBytes_GET_SIZE(set) % 4) {
            PyErr_SetString(PyExc_TypeError, "a set of filters is bytes of int32 ranks");
            goto done;
        }
        const int32_t *items = (const int32_t *)PyBytes_AS_STRING(set);
        for (Py_ssize_t i = 0; i < PyBytes_GET_SIZE(set) / 4; i++)
            if (vec_push(&ranks, items[i]) < 0)
                goto done;
    }
    sort_unique(&ranks);
    Py_ssize_t count = ranks.len;
    for (Py_ssize_t i = 0; i < count; i++)
        if (ranks.data[i] < 0 || ranks.data[i] >= PyList_GET_SIZE(ids)) {
            PyErr_Format(PyExc_ValueError, "filter %d out of range", ranks.data[i]);
            goto done;
        }
    out = PyTuple_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++)
        PyTuple_SET_ITEM(out, i, Py_NewRef(PyList_GET_ITEM(ids, ranks.data[i])));
done:
    PyMem_Free(ranks.data);
    return out;
}

/* A frozenset of ints cannot be part of a reference cycle, so the cyclic collector
 * need not look at it; the machine holds hundreds of thousands of such states, and
 * every collection would visit each of their elements. (CPython untracks tuples and
 * dicts of atomic items by itself, but never sets.) */
static PyObject *untrack(PyObject *module, PyObject *states)
{
    (void)module;
    if (!PyFrozenSet_CheckExact(states)) {
        PyErr_SetString(PyExc_TypeError, "untrack takes a frozenset of ints");
        return NULL;
    }
    if (!PyObject_GC_IsTracked(states)) /* e.g. built by this kernel: nothing to check */
        Py_RETURN_NONE;
    PyObject *iterator = PyObject_GetIter(states), *item;
    if (iterator == NULL)
        return NULL;
    int ints = 1;
    while (ints && (item = PyIter_Next(iterator)) != NULL) {
        ints = PyLong_CheckExact(item);
        Py_DECREF(item);
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred())
        return NULL;
    if (!ints) {
        PyErr_SetString(PyExc_TypeError, "untrack takes a frozenset of ints");
        return NULL;
    }
    PyObject_GC_UnTrack(states);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"untrack", untrack, METH_O,
     "untrack(states): take a frozenset of ints out of the cyclic garbage collector's view"},
    {"answer", answer, METH_VARARGS,
     "answer(sets, ids) -> tuple: the ids (a list, by rank) of the filters in the union of "
     "sets (a tuple of bytes of sorted int32 ranks), in rank order"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_states", "State construction of the XPush machine in C.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__states(void)
{
    if (PyType_Ready(&StateKernelType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "StateKernel", (PyObject *)&StateKernelType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

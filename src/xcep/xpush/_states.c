/* State construction of the XPush machine in C (machine.py, _eval and _pop).
 *
 * A StateKernel holds a workload's AFA as flat arrays (the kind of each state,
 * its ε-successors and its watchers, both as offset + target arrays) and the
 * machine's back table (state -> {label: states stepping into it}). It
 * computes what the Python methods compute, on the same sets:
 *
 *   eval(bases, enabled, trues, nots) -> set
 *       eval(q): the states matched at a node (XPushMachine._eval);
 *   eval_pop(bases, enabled, trues, nots, label, wildcard, parent_enabled,
 *            early) -> (frozenset up, frozenset proven or None)
 *       eval then t_pop (XPushMachine._pop): the parent's states that the
 *       matched states complete, and the early states among them.
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

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    uint8_t *kind, *early;
    int32_t *eps_at, *eps, *watch_at, *watch;
    PyObject *back; /* list: state -> dict or None */
    uint32_t gen;
    uint32_t *matched, *decided, *up_seen;
    IntVec list, heap, up;
} StateKernel;

static void kernel_dealloc(StateKernel *self)
{
    PyMem_Free(self->kind);
    PyMem_Free(self->early);
    PyMem_Free(self->eps_at);
    PyMem_Free(self->eps);
    PyMem_Free(self->watch_at);
    PyMem_Free(self->watch);
    PyMem_Free(self->matched);
    PyMem_Free(self->decided);
    PyMem_Free(self->up_seen);
    PyMem_Free(self->list.data);
    PyMem_Free(self->heap.data);
    PyMem_Free(self->up.data);
    Py_XDECREF(self->back);
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

/* Offsets (n + 1 of them, from 0, not decreasing) and targets (states < n). */
static int check_csr(const int32_t *at, const int32_t *targets, Py_ssize_t count, Py_ssize_t n,
                     const char *what)
{
    if (at[0] != 0 || at[n] != count) {
        PyErr_Format(PyExc_ValueError, "%s: bad offsets", what);
        return -1;
    }
    for (Py_ssize_t s = 0; s < n; s++)
        if (at[s + 1] < at[s]) {
            PyErr_Format(PyExc_ValueError, "%s: bad offsets", what);
            return -1;
        }
    for (Py_ssize_t i = 0; i < count; i++)
        if (targets[i] < 0 || targets[i] >= n) {
            PyErr_Format(PyExc_ValueError, "%s: state out of range", what);
            return -1;
        }
    return 0;
}

static PyObject *kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"kind", "eps_at", "eps", "watch_at", "watch", "early", "back", NULL};
    Py_buffer kind, eps_at, eps, watch_at, watch, early;
    PyObject *back;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*y*y*y*y*O!", keywords, &kind, &eps_at, &eps,
                                     &watch_at, &watch, &early, &PyList_Type, &back))
        return NULL;
    StateKernel *self = (StateKernel *)type->tp_alloc(type, 0);
    Py_ssize_t n = kind.len;
    if (self == NULL)
        goto done;
    self->n = n;
    self->gen = 0;
    Py_INCREF(back);
    self->back = back;
    if (PyList_GET_SIZE(back) != n) {
        PyErr_SetString(PyExc_ValueError, "back: one entry per state");
        goto fail;
    }
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many states");
        goto fail;
    }
    if (!(self->kind = copy_buffer(&kind, n, 1, "kind")) ||
        !(self->early = copy_buffer(&early, n, 1, "early")) ||
        !(self->eps_at = copy_buffer(&eps_at, n + 1, 4, "eps_at")) ||
        !(self->eps = copy_buffer(&eps, eps.len / 4, 4, "eps")) ||
        !(self->watch_at = copy_buffer(&watch_at, n + 1, 4, "watch_at")) ||
        !(self->watch = copy_buffer(&watch, watch.len / 4, 4, "watch")))
        goto fail;
    if (check_csr(self->eps_at, self->eps, eps.len / 4, n, "eps") < 0 ||
        check_csr(self->watch_at, self->watch, watch.len / 4, n, "watch") < 0)
        goto fail;
    for (Py_ssize_t s = 0; s < n; s++)
        if (self->kind[s] > NOT || (self->kind[s] == NOT && self->eps_at[s + 1] == self->eps_at[s])) {
            PyErr_SetString(PyExc_ValueError, "kind: OR, AND or NOT (with a successor)");
            goto fail;
        }
    uint32_t **stamps[] = {&self->matched, &self->decided, &self->up_seen};
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
    PyBuffer_Release(&eps_at);
    PyBuffer_Release(&eps);
    PyBuffer_Release(&watch_at);
    PyBuffer_Release(&watch);
    PyBuffer_Release(&early);
    return (PyObject *)self;
}

/* A fresh generation for the stamp arrays (cleared when the counter wraps). */
static void next_generation(StateKernel *self)
{
    if (++self->gen == 0) {
        size_t bytes = (size_t)self->n * sizeof(uint32_t);
        memset(self->matched, 0, bytes);
        memset(self->decided, 0, bytes);
        memset(self->up_seen, 0, bytes);
        self->gen = 1;
    }
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
    for (int32_t i = self->watch_at[s]; i < self->watch_at[s + 1]; i++)
        if (heap_push(&self->heap, self->watch[i]) < 0)
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
        const int32_t *first = self->eps + self->eps_at[s], *end = self->eps + self->eps_at[s + 1];
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

/* A set (or a fresh frozenset) of the states in `v`. */
static PyObject *set_of(IntVec *v, int frozen)
{
    PyObject *out = frozen ? PyFrozenSet_New(NULL) : PySet_New(NULL);
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
    return out;
}

static PyObject *kernel_eval(StateKernel *self, PyObject *args)
{
    PyObject *bases;
    Py_buffer enabled, trues, nots;
    if (!PyArg_ParseTuple(args, "Oz*y*y*", &bases, &enabled, &trues, &nots))
        return NULL;
    PyObject *out = evaluate(self, bases, &enabled, &trues, &nots) < 0 ? NULL
                                                                       : set_of(&self->list, 0);
    PyBuffer_Release(&enabled);
    PyBuffer_Release(&trues);
    PyBuffer_Release(&nots);
    return out;
}

/* Add the states of a tuple from the back table to self->up (enabled at the parent). */
static int step_up(StateKernel *self, PyObject *states, const uint8_t *parent_enabled)
{
    if (!PyTuple_Check(states)) {
        PyErr_SetString(PyExc_TypeError, "back table entries must be tuples of states");
        return -1;
    }
    uint32_t gen = self->gen;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(states); i++) {
        Py_ssize_t t = state_of(self, PyTuple_GET_ITEM(states, i));
        if (t < 0)
            return -1;
        if (!has(parent_enabled, (int32_t)t) || self->up_seen[t] == gen)
            continue;
        self->up_seen[t] = gen;
        if (vec_push(&self->up, (int32_t)t) < 0)
            return -1;
    }
    return 0;
}

/* eval, then t_pop to the parent: (frozenset up, frozenset proven or None). */
static PyObject *pop(StateKernel *self, PyObject *bases, Py_buffer *enabled, Py_buffer *trues,
                     Py_buffer *nots, PyObject *label, PyObject *wildcard, Py_buffer *parent,
                     int early)
{
    const uint8_t *parent_enabled;
    if (wildcard != Py_None && !PyUnicode_Check(wildcard)) {
        PyErr_SetString(PyExc_TypeError, "wildcard must be a str or None");
        return NULL;
    }
    if (bitmap(self, parent, &parent_enabled) < 0 || evaluate(self, bases, enabled, trues, nots) < 0)
        return NULL;
    PyObject *proven = NULL;
    self->up.len = 0;
    for (Py_ssize_t i = 0; i < self->list.len; i++) {
        int32_t s = self->list.data[i];
        if (early && self->early[s]) {
            PyObject *state = PyLong_FromLong(s);
            if (proven == NULL)
                proven = PyFrozenSet_New(NULL);
            if (state == NULL || proven == NULL || PySet_Add(proven, state) < 0) {
                Py_XDECREF(state);
                goto fail;
            }
            Py_DECREF(state);
            continue;
        }
        PyObject *by_label = PyList_GET_ITEM(self->back, s);
        if (by_label == Py_None)
            continue;
        if (!PyDict_Check(by_label)) {
            PyErr_SetString(PyExc_TypeError, "back table entries must be dicts or None");
            goto fail;
        }
        PyObject *exact = PyDict_GetItemWithError(by_label, label);
        if (exact == NULL && PyErr_Occurred())
            goto fail;
        if (exact != NULL && step_up(self, exact, parent_enabled) < 0)
            goto fail;
        if (wildcard != Py_None) {
            PyObject *loose = PyDict_GetItemWithError(by_label, wildcard);
            if (loose == NULL && PyErr_Occurred())
                goto fail;
            if (loose != NULL && step_up(self, loose, parent_enabled) < 0)
                goto fail;
        }
    }
    PyObject *up = set_of(&self->up, 1);
    if (up == NULL)
        goto fail;
    return Py_BuildValue("(NN)", up, proven ? proven : Py_NewRef(Py_None));
fail:
    Py_XDECREF(proven);
    return NULL;
}

static PyObject *kernel_eval_pop(StateKernel *self, PyObject *args)
{
    PyObject *bases, *label, *wildcard, *out;
    Py_buffer enabled, trues, nots, parent;
    int early;
    if (!PyArg_ParseTuple(args, "Oz*y*y*UOz*p", &bases, &enabled, &trues, &nots, &label, &wildcard,
                          &parent, &early))
        return NULL;
    out = pop(self, bases, &enabled, &trues, &nots, label, wildcard, &parent, early);
    PyBuffer_Release(&enabled);
    PyBuffer_Release(&trues);
    PyBuffer_Release(&nots);
    PyBuffer_Release(&parent);
    return out;
}

static PyMethodDef kernel_methods[] = {
    {"eval", (PyCFunction)kernel_eval, METH_VARARGS,
     "eval(bases, enabled, trues, nots) -> set: the states matched at a node"},
    {"eval_pop", (PyCFunction)kernel_eval_pop, METH_VARARGS,
     "eval_pop(bases, enabled, trues, nots, label, wildcard, parent_enabled, early)\n"
     "-> (frozenset up, frozenset proven or None): eval, then t_pop to the parent"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StateKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xpush._states.StateKernel",
    .tp_basicsize = sizeof(StateKernel),
    .tp_dealloc = (destructor)kernel_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StateKernel(kind, eps_at, eps, watch_at, watch, early, back): eval and t_pop "
              "over a workload's AFA (offsets and targets as native int32 bytes)",
    .tp_methods = kernel_methods,
    .tp_new = kernel_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_states", "State construction of the XPush machine in C.", -1, NULL,
    NULL, NULL, NULL, NULL,
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

/* The compiled automaton: a run of one XSeq query's pushdown automaton over a stream's
 * event batches, with its stack of frames, its waiting threads and its ε-closure in C.
 *
 * xcep/xseq/vm.py makes the plan (the machine's states as tables) for the queries it takes
 * and says why it takes no other; what is dynamic stays Python objects: the tests of an
 * open tag's attributes (guards), the bindings (a tuple per thread: per variable its node's
 * record, or for a Kleene-* variable the tuple of its records, in match order) and the rows.
 * A record — (node id, depth, tag, the values of the plan's attributes) — is made once per
 * element, when a variable binds it, so that two bindings are equal exactly when their
 * slots hold the same objects. The Python automaton (xcep/xseq/automaton.py) is the
 * reference; docs/xseq.md, "The compiled automaton".
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { OPEN = 0, ATTR = 1, TEXT = 2, CLOSE = 3 };
enum { S_WAIT = 0, S_MATCH = 1, S_PASS = 2, S_BEGIN = 3, S_ACCEPT = 4, S_ENTER = 5, S_ITER = 6 };
enum { W_ANY = 0, W_NEXT = 1, W_DESC = 2 };
enum { T_ATTR = 0, T_FIRST = 1, T_LAST = 2, T_ALL = 3, T_TAG = 4, T_NODES = 5 };
enum { T_PATH = 6, T_PATH_FIRST = 7, T_PATH_LAST = 8 }; /* values below: a path's */
enum { P_TEXT = 0, P_ATTR = 1 }; /* what a path ends on: text children, an attribute */
#define ANY_NAME (-2) /* a wait state that takes any element */
#define UNKNOWN (-1)  /* a wait state whose name the symbols do not have (yet) */

typedef struct {
    int32_t state;
    PyObject *binding; /* a strong reference */
} Thread;

typedef struct {
    Thread *at;
    Py_ssize_t len, cap;
} Threads;

static int threads_push(Threads *t, int32_t state, PyObject *binding)
{
    if (t->len == t->cap) {
        Py_ssize_t cap = t->cap ? 2 * t->cap : 8;
        Thread *at = PyMem_Realloc(t->at, (size_t)cap * sizeof *at);
        if (at == NULL)
            return PyErr_NoMemory(), -1;
        t->at = at, t->cap = cap;
    }
    t->at[t->len].state = state;
    t->at[t->len++].binding = Py_NewRef(binding);
    return 0;
}

static void threads_clear(Threads *t)
{
    for (Py_ssize_t i = 0; i < t->len; i++)
        Py_DECREF(t->at[i].binding);
    t->len = 0;
}

static void threads_free(Threads *t)
{
    threads_clear(t);
    PyMem_Free(t->at);
    t->at = NULL, t->cap = 0;
}

typedef struct {
    long long node;   /* the element's node id (-1: the document node) */
    PyObject *tag;    /* its name (NULL: the document node) */
    PyObject *record; /* its record, once a variable bound it */
    Threads lists[3]; /* the threads waiting here: for any child, the next one, a descendant */
    /* the paths read below bound nodes that go on here: per record (`binding`) the path and
     * the step it is at (`state` = path << 8 | step + 1; step -1: its text children are the
     * path's values) */
    Threads collect;
} Frame;

typedef struct {
    Py_ssize_t wait; /* the frame whose close makes the row ready (-1: ready) */
    PyObject *row;   /* the match's binding: its row is made when it is ready */
} Entry;

/* Where the attributes of the open tag being read are: the batch's columns from `first`
 * to `end`, or (across batches) the list `raw` of (name, value, node) already. */
typedef struct {
    const uint8_t *kinds;
    const int32_t *names;
    const long long *nodes;
    PyObject *values, *symbols;
    Py_ssize_t first, end;
    PyObject *raw; /* made when first asked for (a strong reference) */
} Attrs;

typedef struct {
    PyObject_HEAD
    /* the plan */
    Py_ssize_t nstates, nstart;
    uint8_t *kind, *mode, *side, *kleene;
    int32_t *next_at, *next, *slot, *start, *test_id;
    PyObject *tests;      /* per state: the name a wait state tests (str), or None */
    PyObject *guards;     /* per state: a test of an open tag's attributes, or None */
    PyObject *attributes; /* the names whose values a record keeps (a tuple) */
    PyObject *terms;      /* the row's terms: (op, slot, index) */
    PyObject *empty;      /* the empty binding */
    Py_ssize_t width;     /* its variables' slots (after them: where each group was entered) */
    PyObject *paths;      /* the paths read below bound nodes: (names, end kind, attribute) */
    int32_t *path_at, *path_ids; /* per path its steps in path_ids (the names' symbol ids) */
    Py_ssize_t npaths;
    int as_values;        /* matches as their terms' values (aggregates), not rows */
    PyObject *accept;     /* a match's conditions: a callable on its binding, or None */
    PyObject *checks;     /* per state: a guard the closure tests (not tested at the open), or
                           * an iteration's conditions (a callable on the binding), or None */
    /* the stream's symbols the test ids are of, and how many names they had */
    PyObject *symbols;
    Py_ssize_t known;
    /* the run */
    Frame *frames;
    Py_ssize_t depth, cap, skip, descs; /* descs: frames with threads waiting for descendants */
    long long doc;
    int in_doc;
    Entry *queue;
    Py_ssize_t qhead, qlen, qcap;
    PyObject *out; /* rows released, taken by feed */
    PyObject *pending_tag, *pending_raw; /* an open tag whose attributes go on in the next batch */
    long long pending_node;
    Threads stack, seen, passed;
    PyObject **matches;
    Py_ssize_t nmatches, matches_cap;
} Vm;

static PyTypeObject VmType;

/* ----- bindings ----- */

/* Whether two bindings hold the same nodes in their first n items: records are one object
 * per element. */
static int binding_equal(PyObject *a, PyObject *b, Py_ssize_t n)
{
    if (a == b)
        return 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(a, i), *y = PyTuple_GET_ITEM(b, i);
        if (x == y)
            continue;
        if (x == Py_None || y == Py_None || PyTuple_GET_SIZE(x) != PyTuple_GET_SIZE(y))
            return 0;
        if (PyTuple_GET_SIZE(x) == 0 || !PyTuple_Check(PyTuple_GET_ITEM(x, 0)))
            return 0; /* two records (plain variables), not the same */
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(x); k++)
            if (PyTuple_GET_ITEM(x, k) != PyTuple_GET_ITEM(y, k))
                return 0;
    }
    return 1;
}

static long long record_node(PyObject *record) { return PyLong_AsLongLong(PyTuple_GET_ITEM(record, 0)); }

static int compare_records(PyObject *x, PyObject *y)
{
    long long a = record_node(x), b = record_node(y);
    return (a > b) - (a < b);
}

/* The order of matches that end at one node: slot by slot, unbound first, a node by its
 * place in the document, a Kleene-* variable's nodes as a sequence (Binding.sort_key). */
static int compare_bindings(const void *pa, const void *pb)
{
    PyObject *a = *(PyObject *const *)pa, *b = *(PyObject *const *)pb;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); i++) {
        PyObject *x = PyTuple_GET_ITEM(a, i), *y = PyTuple_GET_ITEM(b, i);
        if (x == y)
            continue;
        if (x == Py_None || y == Py_None)
            return x == Py_None ? -1 : 1;
        if (PyTuple_GET_SIZE(x) > 0 && PyTuple_Check(PyTuple_GET_ITEM(x, 0))) { /* records */
            Py_ssize_t nx = PyTuple_GET_SIZE(x), ny = PyTuple_GET_SIZE(y);
            for (Py_ssize_t k = 0; k < nx && k < ny; k++) {
                int c = compare_records(PyTuple_GET_ITEM(x, k), PyTuple_GET_ITEM(y, k));
                if (c)
                    return c;
            }
            if (nx != ny)
                return nx < ny ? -1 : 1;
        } else if (PyTuple_GET_SIZE(x) == 0 || PyTuple_GET_SIZE(y) == 0) {
            if (PyTuple_GET_SIZE(x) != PyTuple_GET_SIZE(y))
                return PyTuple_GET_SIZE(x) == 0 ? -1 : 1;
        } else {
            int c = compare_records(x, y);
            if (c)
                return c;
        }
    }
    return 0;
}

/* binding with its slot's variable bound to record (appended for a Kleene-* variable). */
static PyObject *bind(PyObject *binding, Py_ssize_t slot, PyObject *record, int kleene)
{
    Py_ssize_t n = PyTuple_GET_SIZE(binding);
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(binding, i);
        if (i == slot) {
            if (kleene) {
                Py_ssize_t k = PyTuple_GET_SIZE(item);
                PyObject *grown = PyTuple_New(k + 1);
                if (grown == NULL) {
                    Py_DECREF(out);
                    return NULL;
                }
                for (Py_ssize_t j = 0; j < k; j++)
                    PyTuple_SET_ITEM(grown, j, Py_NewRef(PyTuple_GET_ITEM(item, j)));
                PyTuple_SET_ITEM(grown, k, Py_NewRef(record));
                item = grown;
            } else {
                item = Py_NewRef(record);
            }
        } else {
            Py_INCREF(item);
        }
        PyTuple_SET_ITEM(out, i, item);
    }
    return out;
}

/* ----- attributes ----- */

/* The open tag's attributes as a list of (name, value, node), as the guards take them. */
static PyObject *attrs_raw(Attrs *a)
{
    if (a->raw != NULL)
        return a->raw;
    PyObject *raw = PyList_New(0);
    for (Py_ssize_t i = a->first; raw != NULL && i < a->end && a->kinds[i] == ATTR; i++) {
        PyObject *item = Py_BuildValue("(OOL)", PyList_GET_ITEM(a->symbols, a->names[i]),
                                       PyList_GET_ITEM(a->values, i), a->nodes[i]);
        if (item == NULL || PyList_Append(raw, item) < 0)
            Py_CLEAR(raw);
        Py_XDECREF(item);
    }
    return a->raw = raw;
}

/* ----- the frames and the queue ----- */

static int push_frame(Vm *self, long long node, PyObject *tag)
{
    if (self->depth == self->cap) {
        Py_ssize_t cap = self->cap ? 2 * self->cap : 32;
        Frame *frames = PyMem_Realloc(self->frames, (size_t)cap * sizeof *frames);
        if (frames == NULL)
            return PyErr_NoMemory(), -1;
        memset(frames + self->cap, 0, (size_t)(cap - self->cap) * sizeof *frames);
        self->frames = frames, self->cap = cap;
    }
    Frame *f = &self->frames[self->depth++];
    f->node = node;
    f->tag = Py_XNewRef(tag);
    f->record = NULL;
    return 0;
}

static void pop_frame(Vm *self)
{
    Frame *f = &self->frames[--self->depth];
    if (f->lists[W_DESC].len)
        self->descs--;
    for (int k = 0; k < 3; k++)
        threads_clear(&f->lists[k]);
    threads_clear(&f->collect);
    Py_CLEAR(f->tag);
    Py_CLEAR(f->record);
}

static void clear_queue(Vm *self)
{
    for (Py_ssize_t i = self->qhead; i < self->qlen; i++)
        Py_DECREF(self->queue[i].row);
    self->qhead = self->qlen = 0;
}

static int enqueue(Vm *self, Py_ssize_t wait, PyObject *row)
{
    if (self->qhead > 0 && self->qhead == self->qlen)
        self->qhead = self->qlen = 0;
    if (self->qlen == self->qcap) {
        if (self->qhead > 0) { /* room at the front: move the live entries there */
            memmove(self->queue, self->queue + self->qhead,
                    (size_t)(self->qlen - self->qhead) * sizeof *self->queue);
            self->qlen -= self->qhead, self->qhead = 0;
        } else {
            Py_ssize_t cap = self->qcap ? 2 * self->qcap : 64;
            Entry *queue = PyMem_Realloc(self->queue, (size_t)cap * sizeof *queue);
            if (queue == NULL)
                return PyErr_NoMemory(), -1;
            self->queue = queue, self->qcap = cap;
        }
    }
    self->queue[self->qlen].wait = wait;
    self->queue[self->qlen++].row = row; /* (the reference is the queue's) */
    return 0;
}

static PyObject *row_of(Vm *self, PyObject *binding);

/* Hand out the rows at the head of the queue whose nodes have all closed. */
static int pump(Vm *self)
{
    while (self->qhead < self->qlen) {
        Entry *e = &self->queue[self->qhead];
        if (e->wait >= 0 && self->depth > e->wait)
            break;
        PyObject *row = row_of(self, e->row); /* (made now: the values below its nodes are read) */
        int failed = row == NULL || PyList_Append(self->out, row) < 0;
        Py_XDECREF(row);
        Py_DECREF(e->row);
        self->qhead++;
        if (failed)
            return -1;
    }
    return 0;
}

/* ----- rows ----- */

static PyObject *record_value(PyObject *record, Py_ssize_t index)
{
    return PyTuple_GET_ITEM(record, 3 + index);
}

/* The values of one term for a match (as a list): a node's attribute or tag, those of a
 * Kleene-* variable's first, last or every node, or its nodes themselves (to count). */
static PyObject *term_values(Vm *self, PyObject *term, PyObject *binding, int *several)
{
    long op = PyLong_AsLong(PyTuple_GET_ITEM(term, 0));
    PyObject *bound = PyTuple_GET_ITEM(binding, PyLong_AsSsize_t(PyTuple_GET_ITEM(term, 1)));
    Py_ssize_t index = PyLong_AsSsize_t(PyTuple_GET_ITEM(term, 2));
    PyObject *out = PyList_New(0);
    *several = op == T_ALL; /* a row's term of several values (else of one: or None) */
    if (out == NULL || bound == Py_None)
        return out;
    Py_ssize_t k = PyTuple_GET_SIZE(bound), first = 0, last = k;
    /* a Kleene-* variable's tuple of records (empty, or of tuples), or one record */
    int many = k == 0 || PyTuple_Check(PyTuple_GET_ITEM(bound, 0));
    if (!many)
        bound = PyTuple_Pack(1, bound), k = 1, first = 0, last = 1;
    else if (op == T_FIRST || op == T_PATH_FIRST)
        last = k ? 1 : 0;
    else if (op == T_LAST || op == T_PATH_LAST)
        first = k ? k - 1 : 0;
    else if (op == T_PATH)
        *several = 1; /* every node's values */
    if (bound == NULL)
        return Py_DECREF(out), NULL;
    Py_ssize_t paths_at = 3 + PyTuple_GET_SIZE(self->attributes);
    for (Py_ssize_t i = first; i < last && out != NULL; i++) {
        PyObject *record = PyTuple_GET_ITEM(bound, i);
        if (op >= T_PATH) { /* the values read below it */
            PyObject *values = PyTuple_GET_ITEM(record, paths_at + index);
            if (PyList_SetSlice(out, PyList_GET_SIZE(out), PyList_GET_SIZE(out), values) < 0)
                Py_CLEAR(out);
            continue;
        }
        PyObject *v = op == T_TAG ? PyTuple_GET_ITEM(record, 2) : op == T_NODES ? record : record_value(record, index);
        if (v != Py_None && PyList_Append(out, v) < 0)
            Py_CLEAR(out);
    }
    if (!many)
        Py_DECREF(bound);
    return out;
}

/* A match's row (a term of one node: its value or None, or the list of several; of a
 * Kleene-* variable's nodes: the list), or with `as_values` (aggregates) the values of
 * every term, as Aggregator.add_values takes them. */
static PyObject *row_of(Vm *self, PyObject *binding)
{
    Py_ssize_t n = PyTuple_GET_SIZE(self->terms);
    PyObject *row = PyList_New(n);
    for (Py_ssize_t t = 0; row != NULL && t < n; t++) {
        PyObject *term = PyTuple_GET_ITEM(self->terms, t);
        int several;
        PyObject *values = term_values(self, term, binding, &several);
        if (values == NULL) {
            Py_CLEAR(row);
            break;
        }
        if (!self->as_values && !several && PyList_GET_SIZE(values) <= 1) { /* one, or None */
            PyObject *value = PyList_GET_SIZE(values) ? PyList_GET_ITEM(values, 0) : Py_None;
            Py_SETREF(values, Py_NewRef(value));
        }
        PyList_SET_ITEM(row, t, values);
    }
    return row;
}

/* The frame whose close the row of a match waits for: the highest one among its nodes that
 * are still open (an element is open while its frame holds its node); -1 when none is. */
static Py_ssize_t wait_of(Vm *self, PyObject *binding, Py_ssize_t end)
{
    Py_ssize_t wait = end > 0 ? end : -1;
    for (Py_ssize_t i = 0; i < self->width; i++) {
        PyObject *x = PyTuple_GET_ITEM(binding, i);
        if (x == Py_None || PyTuple_GET_SIZE(x) == 0)
            continue;
        int many = PyTuple_Check(PyTuple_GET_ITEM(x, 0));
        for (Py_ssize_t k = 0; k < (many ? PyTuple_GET_SIZE(x) : 1); k++) {
            PyObject *record = many ? PyTuple_GET_ITEM(x, k) : x;
            Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 1));
            if (d < self->depth && self->frames[d].record == record && (wait < 0 || d < wait))
                wait = d;
        }
    }
    return wait;
}

/* ----- the closure ----- */

static PyObject *record_of(Vm *self, Py_ssize_t f, Attrs *attrs)
{
    Frame *frame = &self->frames[f];
    if (frame->record != NULL)
        return frame->record;
    Py_ssize_t n = PyTuple_GET_SIZE(self->attributes);
    PyObject *record = PyTuple_New(3 + n + self->npaths);
    if (record == NULL)
        return NULL;
    for (Py_ssize_t p = 0; p < self->npaths; p++) { /* the values of the paths below it */
        PyObject *values = PyList_New(0);
        if (values == NULL)
            return Py_DECREF(record), NULL;
        PyTuple_SET_ITEM(record, 3 + n + p, values);
    }
    PyTuple_SET_ITEM(record, 0, PyLong_FromLongLong(frame->node));
    PyTuple_SET_ITEM(record, 1, PyLong_FromSsize_t(f));
    PyTuple_SET_ITEM(record, 2, Py_NewRef(frame->tag ? frame->tag : Py_None));
    PyObject *raw = n ? attrs_raw(attrs) : NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *value = Py_None;
        for (Py_ssize_t i = 0; raw != NULL && i < PyList_GET_SIZE(raw); i++) {
            PyObject *item = PyList_GET_ITEM(raw, i);
            int same = PyUnicode_Compare(PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(self->attributes, k));
            if (same == 0) {
                value = PyTuple_GET_ITEM(item, 1);
                break;
            }
        }
        PyTuple_SET_ITEM(record, 3 + k, Py_NewRef(value));
    }
    if ((n && raw == NULL) || PyErr_Occurred() || !PyTuple_GET_ITEM(record, 0) || !PyTuple_GET_ITEM(record, 1)) {
        Py_DECREF(record);
        return NULL;
    }
    for (Py_ssize_t p = 0; frame->node != -1 && p < self->npaths; p++) /* the paths go on below it */
        if (threads_push(&frame->collect, (int32_t)(p << 8 | (self->path_at[p + 1] > self->path_at[p])),
                         record) < 0)
            return Py_DECREF(record), NULL;
    return frame->record = record;
}

static int push_next(Vm *self, int32_t state, PyObject *binding)
{
    for (int32_t k = self->next_at[state]; k < self->next_at[state + 1]; k++)
        if (threads_push(&self->stack, self->next[k], binding) < 0)
            return -1;
    return 0;
}

/* Follow the automaton from the threads in self->stack at the node of frame `here`: the
 * waits go to the frame of its children (`child`) or of its siblings (`sibling`, -1:
 * none), the matches that end here to the queue. */
static int closure(Vm *self, Py_ssize_t here, Py_ssize_t child, Py_ssize_t sibling, Attrs *attrs)
{
    int failed = 0;
    self->seen.len = 0;
    self->nmatches = 0;
    while (self->stack.len && !failed) {
        Thread item = self->stack.at[--self->stack.len];
        int32_t s = item.state;
        int known = 0;
        for (Py_ssize_t i = 0; i < self->seen.len && !known; i++)
            known = self->seen.at[i].state == s &&
                    binding_equal(self->seen.at[i].binding, item.binding, PyTuple_GET_SIZE(item.binding));
        if (known || threads_push(&self->seen, s, item.binding) < 0) {
            failed = !known;
            Py_DECREF(item.binding);
            continue;
        }
        Py_DECREF(item.binding); /* (seen holds it) */
        PyObject *binding = item.binding;
        switch (self->kind[s]) {
        case S_WAIT: {
            Py_ssize_t f = self->side[s] == 0 ? child : sibling;
            if (f < 0)
                break;
            Threads *list = &self->frames[f].lists[self->mode[s]];
            if (self->mode[s] == W_DESC && list->len == 0)
                self->descs++;
            failed = threads_push(list, s, binding) < 0;
            break;
        }
        case S_MATCH:
            if (self->checks != NULL && PyList_GET_ITEM(self->checks, s) != Py_None) {
                /* a predicate on the open tag not tested there (the step is entered after a
                 * choice): tested here, on the same attributes */
                PyObject *raw = attrs_raw(attrs);
                PyObject *verdict = raw ? PyObject_CallOneArg(PyList_GET_ITEM(self->checks, s), raw) : NULL;
                int holds = verdict ? PyObject_IsTrue(verdict) : -1;
                Py_XDECREF(verdict);
                if (holds <= 0) {
                    failed = holds < 0;
                    break;
                }
            }
            if (self->slot[s] >= 0) {
                PyObject *record = record_of(self, here, attrs);
                PyObject *bound = record ? bind(binding, self->slot[s], record, self->kleene[s]) : NULL;
                failed = bound == NULL || push_next(self, s, bound) < 0;
                Py_XDECREF(bound);
            } else {
                failed = push_next(self, s, binding) < 0;
            }
            break;
        case S_PASS:
            failed = push_next(self, s, binding) < 0;
            break;
        case S_ENTER: /* a Kleene-* group: the node it is first entered at, where prev() reads */
            if (self->slot[s] >= 0 && PyTuple_GET_ITEM(binding, self->slot[s]) == Py_None) {
                PyObject *record = record_of(self, here, attrs);
                PyObject *bound = record ? bind(binding, self->slot[s], record, 0) : NULL;
                failed = bound == NULL || push_next(self, s, bound) < 0;
                Py_XDECREF(bound);
            } else {
                failed = push_next(self, s, binding) < 0;
            }
            break;
        case S_ITER: /* the end of an iteration: its conditions */
            if (self->checks != NULL && PyList_GET_ITEM(self->checks, s) != Py_None) {
                PyObject *verdict = PyObject_CallOneArg(PyList_GET_ITEM(self->checks, s), binding);
                int holds = verdict ? PyObject_IsTrue(verdict) : -1;
                Py_XDECREF(verdict);
                if (holds <= 0) {
                    failed = holds < 0;
                    break;
                }
            }
            failed = push_next(self, s, binding) < 0;
            break;
        case S_BEGIN:
            failed = push_next(self, s, self->empty) < 0;
            break;
        default: /* S_ACCEPT */
            if (self->nmatches == self->matches_cap) {
                Py_ssize_t cap = self->matches_cap ? 2 * self->matches_cap : 16;
                PyObject **grown = PyMem_Realloc(self->matches, (size_t)cap * sizeof *grown);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    failed = 1;
                    break;
                }
                self->matches = grown, self->matches_cap = cap;
            }
            self->matches[self->nmatches++] = binding; /* (seen holds it) */
        }
    }
    threads_clear(&self->stack);
    /* the matches that end here: each once, in order, a row each */
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < self->nmatches && !failed; i++) {
        int again = 0;
        for (Py_ssize_t k = 0; k < n && !again; k++)
            again = binding_equal(self->matches[k], self->matches[i], self->width);
        if (!again)
            self->matches[n++] = self->matches[i];
    }
    if (n > 1)
        qsort(self->matches, (size_t)n, sizeof *self->matches, compare_bindings);
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        PyObject *binding = self->matches[i];
        if (self->accept != Py_None) { /* its conditions, on its nodes' open tags */
            PyObject *verdict = PyObject_CallOneArg(self->accept, binding);
            int holds = verdict ? PyObject_IsTrue(verdict) : -1;
            Py_XDECREF(verdict);
            failed = holds < 0;
            if (holds <= 0)
                continue;
        }
        Py_INCREF(binding);
        failed = enqueue(self, wait_of(self, binding, here), binding) < 0;
        if (failed)
            Py_DECREF(binding);
    }
    threads_clear(&self->seen);
    if (failed || PyErr_Occurred())
        return -1;
    return pump(self);
}

/* ----- events ----- */

static int start_document(Vm *self, long long doc)
{
    if (self->in_doc && self->depth > 1)
        clear_queue(self); /* its root never closed: the document was malformed */
    while (self->depth)
        pop_frame(self);
    self->skip = 0, self->descs = 0;
    self->doc = doc, self->in_doc = 1;
    if (push_frame(self, -1, NULL) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < self->nstart; i++)
        if (threads_push(&self->stack, self->start[i], self->empty) < 0)
            return -1;
    Attrs none = {0};
    return closure(self, 0, 0, -1, &none);
}

static inline int takes(Vm *self, int32_t wait, int32_t name)
{
    int32_t id = self->test_id[wait];
    return id == ANY_NAME || (id >= 0 && id == name);
}

/* An element opens: its tag, node, name id (-1: a name no wait state tests, or none known
 * across batches: its tag is compared then) and attributes. */
static int open_element(Vm *self, PyObject *tag, long long node, int32_t name, Attrs *attrs)
{
    if (self->skip) {
        self->skip++;
        return 0;
    }
    Frame *parent = &self->frames[self->depth - 1];
    Threads *found = &self->stack;
    int failed = 0;
    Threads *lists[2] = {&parent->lists[W_NEXT], &parent->lists[W_ANY]};
    for (int g = 0; g < 2 && !failed; g++)
        for (Py_ssize_t i = 0; i < lists[g]->len && !failed; i++) {
            Thread *t = &lists[g]->at[i];
            if (takes(self, t->state, name))
                failed = push_next(self, t->state, t->binding) < 0;
        }
    threads_clear(&parent->lists[W_NEXT]); /* the next child is this one */
    for (Py_ssize_t f = 0; self->descs && f < self->depth && !failed; f++) {
        Threads *list = &self->frames[f].lists[W_DESC];
        for (Py_ssize_t i = 0; i < list->len && !failed; i++)
            if (takes(self, list->at[i].state, name))
                failed = push_next(self, list->at[i].state, list->at[i].binding) < 0;
    }
    /* the predicates the open tag's attributes decide: failing threads die here */
    for (Py_ssize_t i = 0; i < found->len && !failed;) {
        PyObject *guard = PyList_GET_ITEM(self->guards, found->at[i].state);
        int passed = 1;
        if (guard != Py_None) {
            PyObject *raw = attrs_raw(attrs);
            PyObject *result = raw ? PyObject_CallOneArg(guard, raw) : NULL;
            passed = result ? PyObject_IsTrue(result) : -1;
            Py_XDECREF(result);
            failed = passed < 0;
        }
        if (passed > 0) {
            i++;
        } else {
            Py_DECREF(found->at[i].binding);
            found->at[i] = found->at[--found->len];
        }
    }
    /* the paths read below bound nodes that go on at this child: its values, or a step on */
    Threads *passed = &self->passed;
    Threads *collect = &parent->collect;
    for (Py_ssize_t i = 0; i < collect->len && !failed; i++) {
        int32_t code = collect->at[i].state, path = code >> 8, step = (code & 0xFF) - 1;
        if (step < 0 || self->path_ids[self->path_at[path] + step] != name || name < 0)
            continue;
        PyObject *spec = PyTuple_GET_ITEM(self->paths, path);
        if (self->path_at[path] + step + 1 < self->path_at[path + 1]) { /* steps go on */
            failed = threads_push(passed, code + 1, collect->at[i].binding) < 0;
        } else if (PyLong_AsLong(PyTuple_GET_ITEM(spec, 1)) == P_TEXT) { /* its text children */
            failed = threads_push(passed, path << 8, collect->at[i].binding) < 0;
        } else { /* its attribute */
            PyObject *raw = attrs_raw(attrs), *values = PyTuple_GET_ITEM(
                collect->at[i].binding, 3 + PyTuple_GET_SIZE(self->attributes) + path);
            for (Py_ssize_t k = 0; raw != NULL && k < PyList_GET_SIZE(raw); k++) {
                PyObject *item = PyList_GET_ITEM(raw, k);
                if (PyUnicode_Compare(PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(spec, 2)) == 0) {
                    failed = PyList_Append(values, PyTuple_GET_ITEM(item, 1)) < 0;
                    break;
                }
            }
            failed = failed || raw == NULL || PyErr_Occurred();
        }
    }
    if (failed) {
        threads_clear(found);
        threads_clear(passed);
        return -1;
    }
    if (found->len == 0 && self->descs == 0 && passed->len == 0) {
        self->skip = 1; /* nothing can happen below: skip the subtree */
        return 0;
    }
    if (push_frame(self, node, tag) < 0) {
        threads_clear(found);
        threads_clear(passed);
        return -1;
    }
    Frame *frame = &self->frames[self->depth - 1];
    Threads swap = frame->collect; /* (empty: the collectors passed are its own now) */
    frame->collect = *passed, *passed = swap;
    if (found->len == 0)
        return 0;
    Py_ssize_t here = self->depth - 1;
    return closure(self, here, here, here - 1, attrs);
}

/* A text: the value of the paths whose text children are read here. */
static int text(Vm *self, PyObject *value)
{
    Threads *collect = &self->frames[self->depth - 1].collect;
    for (Py_ssize_t i = 0; i < collect->len; i++)
        if ((collect->at[i].state & 0xFF) == 0) {
            Py_ssize_t at = 3 + PyTuple_GET_SIZE(self->attributes) + (collect->at[i].state >> 8);
            if (PyList_Append(PyTuple_GET_ITEM(collect->at[i].binding, at), value) < 0)
                return -1;
        }
    return 0;
}

static int close_element(Vm *self)
{
    if (self->skip) {
        self->skip--;
        return 0;
    }
    if (self->depth <= 1)
        return 0; /* (a close with no open: the event source never gives one) */
    pop_frame(self);
    return pump(self);
}

/* The test ids of the wait states in the symbols of this batch (names it did not know
 * before may be there now). */
static int know_names(Vm *self, PyObject *symbols)
{
    if (symbols != self->symbols) {
        Py_XSETREF(self->symbols, Py_NewRef(symbols));
        self->known = -1;
    }
    Py_ssize_t count = PyList_GET_SIZE(symbols);
    if (count == self->known)
        return 0;
    for (Py_ssize_t s = 0; s < self->nstates; s++) {
        PyObject *name = PyList_GET_ITEM(self->tests, s);
        if (self->kind[s] != S_WAIT)
            continue;
        if (name == Py_None) {
            self->test_id[s] = ANY_NAME;
            continue;
        }
        if (self->test_id[s] != UNKNOWN && self->known >= 0)
            continue;
        self->test_id[s] = UNKNOWN;
        for (Py_ssize_t i = count - 1; i >= 0; i--) { /* (few states, once per new name) */
            int same = PyUnicode_Compare(PyList_GET_ITEM(symbols, i), name);
            if (same == 0) {
                self->test_id[s] = (int32_t)i;
                break;
            }
            if (same == -1 && PyErr_Occurred())
                return -1;
        }
    }
    for (Py_ssize_t p = 0; p < self->npaths; p++) {
        PyObject *names = PyTuple_GET_ITEM(PyTuple_GET_ITEM(self->paths, p), 0);
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
            int32_t *id = &self->path_ids[self->path_at[p] + k];
            if (*id != UNKNOWN && self->known >= 0)
                continue;
            *id = UNKNOWN;
            for (Py_ssize_t i = count - 1; i >= 0; i--)
                if (PyUnicode_Compare(PyList_GET_ITEM(symbols, i), PyTuple_GET_ITEM(names, k)) == 0) {
                    *id = (int32_t)i;
                    break;
                }
            if (PyErr_Occurred())
                return -1;
        }
    }
    self->known = count;
    return 0;
}

/* The name id of tag in the symbols, -1 if they lack it (a tag held across batches). */
static int32_t name_id(Vm *self, PyObject *tag)
{
    for (Py_ssize_t i = 0; self->symbols && i < PyList_GET_SIZE(self->symbols); i++)
        if (PyUnicode_Compare(PyList_GET_ITEM(self->symbols, i), tag) == 0)
            return (int32_t)i;
    PyErr_Clear();
    return -1;
}

static int open_pending(Vm *self)
{
    if (self->pending_tag == NULL)
        return 0;
    PyObject *tag = self->pending_tag, *raw = self->pending_raw;
    self->pending_tag = self->pending_raw = NULL;
    Attrs attrs = {0};
    attrs.raw = raw;
    int failed = open_element(self, tag, self->pending_node, name_id(self, tag), &attrs);
    Py_DECREF(tag);
    Py_XDECREF(attrs.raw);
    return failed;
}

/* feed(docs, kinds, names, values, nodes, symbols) -> rows: the events of one batch. */
static PyObject *vm_feed(Vm *self, PyObject *args)
{
    Py_buffer docs, kinds, names, nodes;
    PyObject *values, *symbols;
    if (!PyArg_ParseTuple(args, "y*y*y*O!y*O!:feed", &docs, &kinds, &names, &PyList_Type, &values,
                          &nodes, &PyList_Type, &symbols))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = kinds.len;
    if (kinds.itemsize != 1 || docs.len != 8 * n || names.len != 4 * n || nodes.len != 8 * n ||
        PyList_GET_SIZE(values) != n) {
        PyErr_SetString(PyExc_ValueError, "feed: the columns of one batch (arrays Q, B, i, q)");
        goto done;
    }
    if (know_names(self, symbols) < 0)
        goto done;
    const unsigned long long *doc = docs.buf;
    const uint8_t *kind = kinds.buf;
    const int32_t *name = names.buf;
    const long long *node = nodes.buf;
    for (Py_ssize_t i = 0; i < n;) {
        if (!self->in_doc || (long long)doc[i] != self->doc) {
            if (open_pending(self) < 0 || start_document(self, (long long)doc[i]) < 0)
                goto done;
        }
        int k = kind[i];
        if (k == ATTR && self->pending_tag != NULL) { /* the attributes of a tag of the last batch */
            PyObject *item = Py_BuildValue("(OOL)", PyList_GET_ITEM(symbols, name[i]),
                                           PyList_GET_ITEM(values, i), node[i]);
            int failed = item == NULL || PyList_Append(self->pending_raw, item) < 0;
            Py_XDECREF(item);
            if (failed)
                goto done;
            i++;
            continue;
        }
        if (open_pending(self) < 0)
            goto done;
        if (k == OPEN) {
            Py_ssize_t j = i + 1;
            while (j < n && kind[j] == ATTR && (long long)doc[j] == self->doc)
                j++;
            PyObject *tag = PyList_GET_ITEM(symbols, name[i]);
            if (j == n) { /* its attributes may go on in the next batch */
                Attrs attrs = {kind, name, node, values, symbols, i + 1, n, NULL};
                PyObject *raw = attrs_raw(&attrs);
                if (raw == NULL)
                    goto done;
                self->pending_tag = Py_NewRef(tag), self->pending_raw = raw;
                self->pending_node = node[i];
                break;
            }
            Attrs attrs = {kind, name, node, values, symbols, i + 1, j, NULL};
            int failed = open_element(self, tag, node[i], name[i], &attrs);
            Py_XDECREF(attrs.raw);
            if (failed < 0)
                goto done;
            i = j;
        } else {
            if (k == CLOSE && close_element(self) < 0)
                goto done;
            if (k == TEXT && !self->skip && text(self, PyList_GET_ITEM(values, i)) < 0)
                goto done;
            i++;
        }
    }
    result = self->out;
    self->out = PyList_New(0);
    if (self->out == NULL) {
        self->out = result;
        result = NULL;
    }
done:
    PyBuffer_Release(&docs);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&names);
    PyBuffer_Release(&nodes);
    return result;
}

/* finish(final) -> rows: the stream ended (final) or stops here (a prefix of it). */
static PyObject *vm_finish(Vm *self, PyObject *args)
{
    int final;
    if (!PyArg_ParseTuple(args, "p:finish", &final))
        return NULL;
    if (open_pending(self) < 0)
        return NULL;
    if (final && self->in_doc) {
        if (self->depth > 1)
            clear_queue(self); /* the last document never ended */
        while (self->depth)
            pop_frame(self);
        self->in_doc = 0;
        if (pump(self) < 0)
            return NULL;
    }
    PyObject *result = self->out;
    self->out = PyList_New(0);
    if (self->out == NULL) {
        self->out = result;
        return NULL;
    }
    return result;
}

/* ----- the run's state, saved and restored ----- */

static PyObject *threads_list(const Threads *t)
{
    PyObject *out = PyList_New(t->len);
    for (Py_ssize_t i = 0; out != NULL && i < t->len; i++) {
        PyObject *item = Py_BuildValue("(iO)", t->at[i].state, t->at[i].binding);
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, item);
    }
    return out;
}

/* state() -> the run's state as plain objects (what restore takes). */
static PyObject *vm_state(Vm *self, PyObject *unused)
{
    PyObject *frames = PyList_New(self->depth), *queue = PyList_New(0);
    for (Py_ssize_t d = 0; frames != NULL && d < self->depth; d++) {
        Frame *f = &self->frames[d];
        PyObject *a = threads_list(&f->lists[0]), *b = threads_list(&f->lists[1]),
                 *c = threads_list(&f->lists[2]), *e = threads_list(&f->collect);
        PyObject *item = a && b && c && e
                             ? Py_BuildValue("(LOONNNN)", f->node, f->tag ? f->tag : Py_None,
                                             f->record ? f->record : Py_None, a, b, c, e)
                             : NULL;
        if (item == NULL) {
            Py_XDECREF(a), Py_XDECREF(b), Py_XDECREF(c), Py_XDECREF(e);
            Py_CLEAR(frames);
        } else {
            PyList_SET_ITEM(frames, d, item);
        }
    }
    for (Py_ssize_t i = self->qhead; queue != NULL && i < self->qlen; i++) {
        PyObject *item = Py_BuildValue("(nO)", self->queue[i].wait, self->queue[i].row);
        if (item == NULL || PyList_Append(queue, item) < 0)
            Py_CLEAR(queue);
        Py_XDECREF(item);
    }
    PyObject *pending = self->pending_tag
                            ? Py_BuildValue("(OLO)", self->pending_tag, self->pending_node, self->pending_raw)
                            : Py_NewRef(Py_None);
    PyObject *result = NULL;
    if (frames && queue && pending)
        result = Py_BuildValue("(LinOOOO)", self->doc, self->in_doc, self->skip, frames, queue,
                               pending, self->out);
    Py_XDECREF(frames);
    Py_XDECREF(queue);
    Py_XDECREF(pending);
    return result;
}

/* Threads saved by state(): each (state, binding) with a state below limit and a binding
 * of size items (a record's: 3 + the attributes + the paths). */
static int load_threads(Threads *t, PyObject *items, long limit, Py_ssize_t size)
{
    if (!PyList_Check(items))
        return PyErr_SetString(PyExc_TypeError, "restore: threads as a list"), -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        int state;
        PyObject *binding;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(items, i), "iO!", &state, &PyTuple_Type, &binding))
            return -1;
        if (state < 0 || state >= limit || PyTuple_GET_SIZE(binding) != size)
            return PyErr_SetString(PyExc_ValueError, "restore: not a state of this plan"), -1;
        if (threads_push(t, state, binding) < 0)
            return -1;
    }
    return 0;
}

/* restore(state): go on from a saved state (of a run of the same plan). */
static PyObject *vm_restore(Vm *self, PyObject *args)
{
    long long doc;
    int in_doc;
    Py_ssize_t skip;
    PyObject *frames, *queue, *pending, *out;
    if (!PyArg_ParseTuple(args, "(LinO!O!OO!):restore", &doc, &in_doc, &skip, &PyList_Type,
                          &frames, &PyList_Type, &queue, &pending, &PyList_Type, &out))
        return NULL;
    while (self->depth)
        pop_frame(self);
    clear_queue(self);
    Py_CLEAR(self->pending_tag);
    Py_CLEAR(self->pending_raw);
    self->doc = doc, self->in_doc = in_doc, self->skip = skip, self->descs = 0;
    for (Py_ssize_t d = 0; d < PyList_GET_SIZE(frames); d++) {
        long long node;
        PyObject *tag, *record, *a, *b, *c, *e;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(frames, d), "LOOOOOO", &node, &tag, &record, &a, &b, &c, &e) ||
            push_frame(self, node, tag == Py_None ? NULL : tag) < 0)
            return NULL;
        Frame *f = &self->frames[d];
        f->record = record == Py_None ? NULL : Py_NewRef(record);
        long states = (long)self->nstates, codes = (long)self->npaths << 8;
        Py_ssize_t slots = PyTuple_GET_SIZE(self->empty);
        Py_ssize_t fields = 3 + PyTuple_GET_SIZE(self->attributes) + self->npaths;
        if (load_threads(&f->lists[0], a, states, slots) < 0 ||
            load_threads(&f->lists[1], b, states, slots) < 0 ||
            load_threads(&f->lists[2], c, states, slots) < 0 ||
            load_threads(&f->collect, e, codes, fields) < 0)
            return NULL;
        self->descs += f->lists[W_DESC].len > 0;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(queue); i++) {
        Py_ssize_t wait;
        PyObject *row;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(queue, i), "nO", &wait, &row) ||
            enqueue(self, wait, Py_NewRef(row)) < 0)
            return NULL;
    }
    if (pending != Py_None) {
        PyObject *tag, *raw;
        if (!PyArg_ParseTuple(pending, "OLO!", &tag, &self->pending_node, &PyList_Type, &raw))
            return NULL;
        self->pending_tag = Py_NewRef(tag), self->pending_raw = PyList_GetSlice(raw, 0, PyList_GET_SIZE(raw));
    }
    Py_XSETREF(self->out, PyList_GetSlice(out, 0, PyList_GET_SIZE(out)));
    Py_RETURN_NONE;
}

/* ----- the type ----- */

static void vm_dealloc(Vm *self)
{
    while (self->depth)
        pop_frame(self);
    for (Py_ssize_t d = 0; d < self->cap; d++) {
        for (int k = 0; k < 3; k++)
            threads_free(&self->frames[d].lists[k]);
        threads_free(&self->frames[d].collect);
    }
    clear_queue(self);
    threads_free(&self->passed);
    threads_free(&self->stack);
    threads_free(&self->seen);
    void *blocks[] = {self->kind, self->mode, self->side, self->kleene, self->next_at, self->next,
                      self->slot, self->start, self->test_id, self->frames, self->queue, self->matches,
                      self->path_at, self->path_ids};
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++)
        PyMem_Free(blocks[k]);
    Py_XDECREF(self->tests);
    Py_XDECREF(self->guards);
    Py_XDECREF(self->attributes);
    Py_XDECREF(self->terms);
    Py_XDECREF(self->empty);
    Py_XDECREF(self->paths);
    Py_XDECREF(self->accept);
    Py_XDECREF(self->checks);
    Py_XDECREF(self->symbols);
    Py_XDECREF(self->out);
    Py_XDECREF(self->pending_tag);
    Py_XDECREF(self->pending_raw);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A bytes-like object of count items of size bytes, copied; NULL with an error. */
static void *copied(PyObject *object, Py_ssize_t count, Py_ssize_t size, const char *what)
{
    Py_buffer buffer;
    if (PyObject_GetBuffer(object, &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    void *out = NULL;
    if (buffer.len != count * size)
        PyErr_Format(PyExc_ValueError, "%s: %zd items of %zd bytes expected", what, count, size);
    else if ((out = PyMem_Malloc((size_t)(count ? count * size : 1))) == NULL)
        PyErr_NoMemory();
    else
        memcpy(out, buffer.buf, (size_t)(count * size));
    PyBuffer_Release(&buffer);
    return out;
}

static PyObject *vm_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"kinds", "modes", "sides", "kleene", "next_at", "next", "slots", "tests",
                               "guards", "start", "attributes", "terms", "empty", "found", "paths",
                               "accept", "checks", "width", NULL};
    PyObject *kinds, *modes, *sides, *kleene, *next_at, *next, *slots, *tests, *guards, *start,
        *attributes, *terms, *empty;
    int found = 0;
    PyObject *paths = NULL, *accept = Py_None, *checks = NULL;
    Py_ssize_t width = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOO!O!OO!O!O!|pO!OO!n:Vm", keywords, &kinds, &modes,
                                     &sides, &kleene, &next_at, &next, &slots, &PyList_Type, &tests,
                                     &PyList_Type, &guards, &start, &PyTuple_Type, &attributes,
                                     &PyTuple_Type, &terms, &PyTuple_Type, &empty, &found, &PyTuple_Type,
                                     &paths, &accept, &PyList_Type, &checks, &width))
        return NULL;
    if (width < 0)
        width = PyTuple_GET_SIZE(empty);
    if (width > PyTuple_GET_SIZE(empty)) {
        PyErr_SetString(PyExc_ValueError, "Vm: width: the variables' slots of the empty binding");
        return NULL;
    }
    if (checks != NULL && PyList_GET_SIZE(checks) != PyList_GET_SIZE(tests)) {
        PyErr_SetString(PyExc_ValueError, "Vm: checks: a guard (or None) per state");
        return NULL;
    }
    if (accept != Py_None && !PyCallable_Check(accept)) {
        PyErr_SetString(PyExc_TypeError, "Vm: accept: a callable or None");
        return NULL;
    }
    Vm *self = (Vm *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_ssize_t n = self->nstates = PyList_GET_SIZE(tests);
    Py_buffer view;
    if (PyObject_GetBuffer(next, &view, PyBUF_SIMPLE) < 0)
        goto fail;
    Py_ssize_t edges = view.len / 4;
    PyBuffer_Release(&view);
    if (PyObject_GetBuffer(start, &view, PyBUF_SIMPLE) < 0)
        goto fail;
    self->nstart = view.len / 4;
    PyBuffer_Release(&view);
    if (!(self->kind = copied(kinds, n, 1, "kinds")) || !(self->mode = copied(modes, n, 1, "modes")) ||
        !(self->side = copied(sides, n, 1, "sides")) || !(self->kleene = copied(kleene, n, 1, "kleene")) ||
        !(self->next_at = copied(next_at, n + 1, 4, "next_at")) ||
        !(self->next = copied(next, edges, 4, "next")) || !(self->slot = copied(slots, n, 4, "slots")) ||
        !(self->start = copied(start, self->nstart, 4, "start")) ||
        !(self->test_id = PyMem_Calloc((size_t)(n ? n : 1), 4)))
        goto fail;
    if (PyList_GET_SIZE(guards) != n) {
        PyErr_SetString(PyExc_ValueError, "Vm: a guard (or None) per state");
        goto fail;
    }
    for (Py_ssize_t s = 0; s < n; s++) {
        Py_ssize_t slot_count = PyTuple_GET_SIZE(empty);
        Py_ssize_t limit = self->kind[s] == S_ENTER ? slot_count : width;
        if (self->kind[s] > S_ITER || self->mode[s] > W_DESC || self->next_at[s] < 0 ||
            self->next_at[s] > self->next_at[s + 1] || self->slot[s] >= limit ||
            (self->kind[s] == S_ENTER && self->slot[s] >= 0 && self->slot[s] < width) ||
            (self->kind[s] == S_WAIT && PyList_GET_ITEM(tests, s) != Py_None &&
             !PyUnicode_Check(PyList_GET_ITEM(tests, s)))) {
            PyErr_Format(PyExc_ValueError, "Vm: state %zd is not well formed", s);
            goto fail;
        }
    }
    if (self->next_at[0] != 0 || self->next_at[n] != edges) {
        PyErr_SetString(PyExc_ValueError, "Vm: next_at: offsets into next");
        goto fail;
    }
    for (Py_ssize_t k = 0; k < edges; k++)
        if (self->next[k] < 0 || self->next[k] >= n) {
            PyErr_SetString(PyExc_ValueError, "Vm: next: a state out of range");
            goto fail;
        }
    for (Py_ssize_t k = 0; k < self->nstart; k++)
        if (self->start[k] < 0 || self->start[k] >= n) {
            PyErr_SetString(PyExc_ValueError, "Vm: start: a state out of range");
            goto fail;
        }
    /* the paths read below bound nodes: (names, what it ends on, the attribute or None) */
    self->paths = paths ? Py_NewRef(paths) : PyTuple_New(0);
    self->npaths = self->paths ? PyTuple_GET_SIZE(self->paths) : 0;
    if (self->paths == NULL || !(self->path_at = PyMem_Calloc((size_t)self->npaths + 1, 4)))
        goto fail;
    for (Py_ssize_t p = 0; p < self->npaths; p++) {
        PyObject *spec = PyTuple_GET_ITEM(self->paths, p), *names, *attribute;
        int kind;
        if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "O!iO", &PyTuple_Type, &names, &kind, &attribute) ||
            (kind != P_TEXT && kind != P_ATTR) || PyTuple_GET_SIZE(names) > 250 ||
            (kind == P_ATTR && (!PyUnicode_Check(attribute) || PyTuple_GET_SIZE(names) == 0))) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "Vm: paths: (names, 0 for text() or 1 for an attribute, it)");
            goto fail;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++)
            if (!PyUnicode_Check(PyTuple_GET_ITEM(names, k))) {
                PyErr_SetString(PyExc_ValueError, "Vm: paths: names as str");
                goto fail;
            }
        self->path_at[p + 1] = self->path_at[p] + (int32_t)PyTuple_GET_SIZE(names);
    }
    if (!(self->path_ids = PyMem_Calloc((size_t)self->path_at[self->npaths] + 1, 4)))
        goto fail;
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(terms); t++) {
        PyObject *term = PyTuple_GET_ITEM(terms, t);
        long op, slot, index;
        if (!PyTuple_Check(term) || !PyArg_ParseTuple(term, "lll", &op, &slot, &index) || op < 0 ||
            op > T_PATH_LAST || slot < 0 || slot >= width ||
            (op < T_TAG && (index < 0 || index >= PyTuple_GET_SIZE(attributes))) ||
            (op >= T_PATH && (index < 0 || index >= self->npaths))) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "Vm: terms: (op, slot, attribute index)");
            goto fail;
        }
    }
    self->tests = Py_NewRef(tests);
    self->guards = Py_NewRef(guards);
    self->attributes = Py_NewRef(attributes);
    self->terms = Py_NewRef(terms);
    self->empty = Py_NewRef(empty);
    self->width = width;
    self->as_values = found;
    self->accept = Py_NewRef(accept);
    self->checks = Py_XNewRef(checks);
    self->known = -1;
    if ((self->out = PyList_New(0)) == NULL)
        goto fail;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyMethodDef vm_methods[] = {
    {"feed", (PyCFunction)vm_feed, METH_VARARGS,
     "feed(docs, kinds, names, values, nodes, symbols) -> rows: a batch's events (its columns "
     "and its symbols' names); the rows whose matches are complete."},
    {"finish", (PyCFunction)vm_finish, METH_VARARGS,
     "finish(final) -> rows: the stream ended (final: a document it leaves open is dropped) or "
     "stops here."},
    {"state", (PyCFunction)vm_state, METH_NOARGS, "state() -> the run's state as plain objects."},
    {"restore", (PyCFunction)vm_restore, METH_VARARGS, "restore(state): go on from a saved state."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject VmType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xseq._vm.Vm",
    .tp_basicsize = sizeof(Vm),
    .tp_dealloc = (destructor)vm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Vm(kinds, modes, sides, kleene, next_at, next, slots, tests, guards, start, "
              "attributes, terms, empty, found=False, paths=(), accept=None, checks=None): a run of the compiled "
              "automaton (xcep/xseq/vm.py); feed and finish give rows, or with found the values of "
              "each match's terms, of the matches accept(binding) holds for",
    .tp_methods = vm_methods,
    .tp_new = vm_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_vm", "The compiled XSeq automaton.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__vm(void)
{
    if (PyType_Ready(&VmType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObjectRef(m, "Vm", (PyObject *)&VmType) < 0)
        Py_CLEAR(m);
    return m;
}

/* The compiled automaton: a run of one XSeq query's pushdown automaton over a stream's
 * event batches, with its stack of frames, its waiting threads and its ε-closure in C.
 *
 * xcep/xseq/vm.py makes the plan (the machine's states as tables) for the queries it takes
 * and says why it takes no other; what is dynamic stays Python objects: the tests of an
 * open tag's attributes (guards), the bindings (a tuple per thread: per variable its node's
 * record, or for a Kleene-* variable the tuple of its records, in match order) and the rows.
 * A record — (node id, depth, tag, document, the values of the plan's attributes, those read
 * below it) — is made once per
 * element, when a variable binds it, so that two bindings are equal exactly when their
 * slots hold the same objects. The Python automaton (xcep/xseq/automaton.py) is the
 * reference; docs/xseq.md, "The compiled automaton".
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#include "numbers.h"

enum { OPEN = 0, ATTR = 1, TEXT = 2, CLOSE = 3 };
enum { S_WAIT = 0, S_MATCH = 1, S_PASS = 2, S_BEGIN = 3, S_ACCEPT = 4, S_ENTER = 5, S_ITER = 6 };
enum { S_IENTER = 7, S_JOIN = 8 }; /* intersect: its context node kept; an operand's end */
enum { S_ATTR = 9 }; /* a last step to an attribute (its name in tests): the element has it */
enum { W_ANY = 0, W_NEXT = 1, W_DESC = 2, W_TEXT = 3, W_DTEXT = 4 }; /* (text(): a child, below) */
#define WAITS 5
enum { T_ATTR = 0, T_FIRST = 1, T_LAST = 2, T_ALL = 3, T_TAG = 4, T_NODES = 5 };
enum { T_PATH = 6, T_PATH_FIRST = 7, T_PATH_LAST = 8 }; /* values below: a path's */
enum { T_PY = 9 }; /* a term made in Python (`py_term`) on the match's nodes */
/* what a path ends on: text children, an attribute, the element (its XML, or with as_text
 * its string value) */
/* P_EVENTS: the element's events, for a pending check; P_STRING: its string value, for a
 * pending check decided in C */
enum { P_TEXT = 0, P_ATTR = 1, P_XML = 2, P_EVENTS = 3, P_STRING = 4 };
/* a collector's step code while an element it reached is written out: in the element's own
 * frame, in those of its descendants */
enum { WRITING = 0xFF, WRITING_INSIDE = 0xFE };
#define HEAD 4 /* a record's fields before its attributes' values: node, depth, tag, document */
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

static int grow(void **at, Py_ssize_t *cap, Py_ssize_t need, size_t size, Py_ssize_t first);

static int threads_push(Threads *t, int32_t state, PyObject *binding)
{
    if (t->len == t->cap && grow((void **)&t->at, &t->cap, t->len + 1, sizeof *t->at, 8) < 0)
        return -1;
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
    Threads lists[WAITS]; /* the threads waiting here: for any child, the next one, a
                           * descendant, a text child, a text below */
    /* the paths read below bound nodes that go on here: per record (`binding`) the path and
     * the step it is at (`state` = path << 8 | step + 1; step -1: its text children are the
     * path's values) */
    Threads collect;
    long long serial; /* which frame this is (rows wait for it to close) */
    /* predicates that read above their node: the element's attributes (a list of (name,
     * value, node)), and once one was decided below it, its node (with its ancestors) */
    PyObject *raw, *made;
} Frame;

typedef struct {
    Py_ssize_t wait; /* the depth of the frame whose close makes the row ready (-1: ready) */
    Py_ssize_t run;  /* the run it is in */
    long long serial; /* the frame's */
    PyObject *row;   /* the match's binding: its row is made when it is ready */
    PyObject *alts;  /* its pending checks: a tuple of alternatives, any of which all hold
                      * (NULL: none) */
    long long edoc, enode; /* its end node's (document, node): where the match ends */
} Entry;

/* A run over a document, or over a partition's virtual document: its stack of frames, and
 * (partition by) the stacks suspended while a partitioned element nested in another of the
 * same partition is read (frames 1.. of each, oldest first; per suspension its length and
 * skip). */
typedef struct {
    Frame *frames;
    Py_ssize_t depth, cap, skip, descs; /* descs: frames with threads waiting for descendants */
    Py_ssize_t dtexts;                  /* frames with threads waiting for texts below */
    PyObject *key;                      /* its partition's key (NULL: a document's run) */
    Frame *saved;
    Py_ssize_t nsaved, saved_cap;
    Py_ssize_t *cuts; /* per suspension: (frames, skip) */
    Py_ssize_t ncuts, cuts_cap;
    /* a selection policy: the earliest start of a match its threads or queued matches may
     * make, as (document, node), when its stack last changed at a close (none: floor_set 0) */
    long long floor_doc, floor_node;
    int floor_set;
} Context;

#define RUN (&self->ctxs[self->cur])

/* Where the attributes of the open tag being read are: the batch's columns from `first`
 * to `end`, or (across batches) the list `raw` of (name, value, node) already. */
typedef struct Attrs {
    const uint8_t *kinds;
    const int32_t *names;
    const long long *nodes;
    PyObject *values, *symbols;
    Py_ssize_t first, end;
    PyObject *raw; /* made when first asked for (a strong reference) */
} Attrs;

/* intersect: at a group's joins, in a closure, the operands a binding reached them by (a
 * bit mask) and, with pending checks, per operand the checks it arrived with (a list of
 * lists of tuples) */
typedef struct {
    uint32_t operands;
    PyObject *arrivals;
} Reached;

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
    int32_t *path_kind;          /* per path what it ends on (P_TEXT …) */
    Py_ssize_t npaths;
    int as_values;        /* matches as their terms' values (aggregates), not rows */
    int numbers;          /* records keep their attributes' numbers (for Conditions) */
    int made;             /* records end with their node made with its ancestors (make_node) */
    PyObject *xml_slots;  /* per slot whether its records write their node out (or NULL: all do) */
    PyObject *escape, *quoteattr; /* xml.sax.saxutils' (text and attributes that need them) */
    int as_text;          /* elements written out as their string values, not XML */
    Py_ssize_t end_slot;  /* nodes as output: the slot of the match's end node, or -1 */
    /* predicates that read a node's subtree (pending checks until it closes): per state a
     * tuple of their numbers or None; the path that captures the node's events; what decides
     * a check ([record, predicate, verdict]) once they are there */
    PyObject *deep, *decide_check;
    Py_ssize_t capture_path;
    PyObject *captures; /* per binding item: whether its records are captured (bytes), or NULL */
    PyObject *capture_names; /* the children a captured node keeps (a frozenset; NULL: all) */
    PyObject *value_checks; /* per pending predicate a Conditions tree on the record (or None) */
    int checks_on_events;   /* whether a step's pending checks need its node's events (some
                             * predicate has no tree) */
    PyObject *self_tests; /* per state: a self step's test of the node it stands on — (the name
                           * or None for any element, whether a root passes) — or None */
    /* predicates that read above their node (its ancestors' tags and attributes): per state
     * a tuple of their numbers or None; what decides them on a node, what makes the nodes */
    PyObject *up, *up_check, *make_node;
    PyObject *py_term; /* what makes a T_PY term: (its number, the binding, as values) -> it */
    PyObject *own; /* a selection policy: per variable slot whether it is the query's own (its
                    * nodes say where a match starts; bytes), or NULL: every match is kept */
    PyObject *early;      /* per state: the per-match conditions decided once it binds the
                           * variables they read ((test, their slots), ...), or None */
    PyObject *accept;     /* a match's conditions: a callable on its binding, or None */
    PyObject *checks;     /* per state: a guard the closure tests (not tested at the open), or
                           * an iteration's conditions (a callable on the binding), or None */
    /* the stream's symbols the test ids are of, and how many names they had */
    PyObject *symbols;
    Py_ssize_t known;
    /* the partitions (partition by): the path of the elements they hold, as steps (whether
     * a // step, the name or None for any), with the names' symbol ids; the key attribute */
    Py_ssize_t nroute;
    uint8_t *route_desc;
    int32_t *route_ids;
    PyObject *route_names, *route_key;
    int32_t route_key_id;
    /* the run: one per partition (by its key: `keys`, in the order they began), or the
     * document's; `cur` the one the events go to */
    Context *ctxs;
    Py_ssize_t nctx, ctx_cap, cur;
    PyObject *keys;
    long long serials; /* the frames pushed so far: each frame's serial */
    /* the stream's elements above (partition by): per depth the steps of the route reached,
     * and the partitioned elements open, innermost last (the depth, the run) */
    uint64_t *masks;
    Py_ssize_t rdepth, masks_cap;
    Py_ssize_t *routing;
    Py_ssize_t nrouting, routing_cap;
    long long doc;
    int in_doc;
    Entry *queue;
    Py_ssize_t qhead, qlen, qcap;
    PyObject *out; /* rows released, taken by feed */
    PyObject *pending_tag, *pending_raw; /* an open tag whose attributes go on in the next batch */
    long long pending_node;
    Threads stack, seen, passed;
    /* the closure's threads seen, by hash: an open-addressing table of their places in
     * `seen` + 1 (0: free), and their hashes */
    Py_ssize_t *seen_at, seen_cap;
    Py_hash_t *seen_hash;
    Py_ssize_t seen_hash_cap;
    PyObject **matches;
    Py_ssize_t nmatches, matches_cap;
    PyObject *text_value;  /* a closure at a text (text() steps): its value (else NULL) */
    PyObject *text_record; /* and record (one: the matches that end there are one) */
    long long text_node;   /* and node id (a text() step's predicates read the text node) */
    PyObject *leaves; /* in a closure, per attribute of the open tag its record, once made */
    /* intersect: per join state (its group, its operand, how many operands) or None; in a
     * closure, the bindings that reached a group's joins (state: the group) and per each
     * the operands that did (a bit mask) */
    PyObject *joins;
    Threads joined;
    Reached *reached;
    Py_ssize_t reached_cap;
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
        if (PyTuple_GET_SIZE(x) == 0 || PyLong_Check(PyTuple_GET_ITEM(x, 0)))
            return 0; /* two records (plain variables), not the same */
        /* (else a Kleene-* variable's records, or pending checks: the same objects) */
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(x); k++)
            if (PyTuple_GET_ITEM(x, k) != PyTuple_GET_ITEM(y, k))
                return 0;
    }
    return 1;
}

/* A thread's hash, as binding_equal sees it: its state, the records of its binding. */
static Py_hash_t thread_hash(int32_t state, PyObject *binding)
{
    Py_uhash_t h = (Py_uhash_t)state * 1000003u + 0x345678u;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(binding); i++) {
        PyObject *x = PyTuple_GET_ITEM(binding, i);
        if (x != Py_None && PyTuple_GET_SIZE(x) > 0 && !PyLong_Check(PyTuple_GET_ITEM(x, 0))) {
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(x); k++) /* a Kleene-* variable's, checks */
                h = (h ^ (Py_uhash_t)(uintptr_t)PyTuple_GET_ITEM(x, k)) * 1000003u;
            h ^= (Py_uhash_t)PyTuple_GET_SIZE(x);
        } else {
            h = (h ^ (Py_uhash_t)(uintptr_t)x) * 1000003u;
        }
        h ^= h >> 29;
    }
    return (Py_hash_t)h;
}

static long long record_field(PyObject *record, Py_ssize_t i) { return PyLong_AsLongLong(PyTuple_GET_ITEM(record, i)); }

/* Two elements' order in the stream: by document, then node. */
static int compare_records(PyObject *x, PyObject *y)
{
    long long a = record_field(x, 3), b = record_field(y, 3);
    if (a == b)
        a = record_field(x, 0), b = record_field(y, 0);
    return (a > b) - (a < b);
}

/* The order of matches that end at one node: slot by slot, unbound first, a node by its
 * place in the document, a Kleene-* variable's nodes as a sequence (Binding.sort_key). */
static Py_ssize_t sorted_items; /* what compare_bindings compares: the slots and entries */

static int compare_bindings(const void *pa, const void *pb)
{
    PyObject *a = *(PyObject *const *)pa, *b = *(PyObject *const *)pb;
    for (Py_ssize_t i = 0; i < sorted_items; i++) {
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

/* ----- conditions on a binding's records ----- */

/* A where clause's conditions on the open tags of a match's nodes (per match, or at each
 * iteration of a Kleene-* group), as a tree that vm.py compiles (`_program`): constants,
 * the attributes and tags of a variable's nodes (its node; a Kleene-* variable's first,
 * last, latest or every node, or prev(): the one before the latest, or where the group was
 * entered), arithmetic on the first value of each side, comparisons (numbers when both
 * values read as numbers, else strings; existential over several), and, or, not, and
 * whether a variable has nodes. Semantics as evaluate.holds on the automaton's nodes
 * (the reference: the property tests compare the two). A Conditions object is also
 * callable from Python on a binding. */
enum { C_CONST, C_FIELD, C_TAG, C_ARITH, C_CMP, C_AND, C_OR, C_NOT, C_EXISTS };
enum { C_OPEN = 9, C_HAS = 10 }; /* a guard's: the open tag's attribute `obj` (its value; there) */
enum { C_PATH = 11 }; /* a pending check's: the values of the record's path at item `at` */
enum { R_ONE, R_FIRST, R_LAST, R_ALL, R_PREV };
enum { A_ADD, A_SUB, A_MUL, A_DIV };

typedef struct {
    int kind, op, which, slot, at, group, left, right;
    PyObject *obj; /* a constant: (its string, its number or None) */
} CNode;

typedef struct {
    PyObject_HEAD
    CNode *nodes;
    Py_ssize_t nnodes;
    int root;
    Py_ssize_t width;      /* the binding's variables (the groups' entries after them) */
    Py_ssize_t numbers_at; /* where a record's attributes' numbers begin */
    PyObject *as_string;   /* a number's string, as values.as_string */
    struct Attrs *open;    /* a guard's: the open tag it is decided on (while it is) */
    PyObject *record;      /* a pending check's: the record it is decided on (while it is) */
} Conditions;

static PyTypeObject ConditionsType;

/* The values of an operand: the attribute `at` (-1: the tag) of records, or one number,
 * or one constant pair. */
typedef struct {
    int kind; /* 0: none, 1: records, 2: a number, 3: a pair, 4: a string (in pair), 5: strings
               * (a list, in pair) */
    PyObject *const *records;
    Py_ssize_t n;
    PyObject *one; /* (where records points for a single one) */
    int at;
    double num;
    PyObject *pair;
} CVal;

/* A string's number (to_number): 1 and *x, or 0 when it does not read as one. */
/* The value of the open tag's attribute `name` (borrowed), or NULL when it has none. */
static PyObject *open_attribute(Attrs *a, PyObject *name)
{
    if (a->raw == NULL) {
        for (Py_ssize_t i = a->first; i < a->end && a->kinds[i] == ATTR; i++) {
            PyObject *key = PyList_GET_ITEM(a->symbols, a->names[i]);
            if (key == name || PyUnicode_Compare(key, name) == 0)
                return PyList_GET_ITEM(a->values, i);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->raw); i++) {
        PyObject *item = PyList_GET_ITEM(a->raw, i);
        if (PyUnicode_Compare(PyTuple_GET_ITEM(item, 0), name) == 0)
            return PyTuple_GET_ITEM(item, 1);
    }
    return NULL;
}

static int string_number(PyObject *text, double *x)
{
    if (!PyUnicode_Check(text) || plainly_not_a_number(text))
        return 0;
    PyObject *number = PyFloat_FromString(text);
    if (number == NULL) {
        PyErr_Clear();
        return 0;
    }
    *x = PyFloat_AS_DOUBLE(number);
    Py_DECREF(number);
    return isfinite(*x) && PyUnicode_FindChar(text, '_', 0, PyUnicode_GET_LENGTH(text), 1) == -1;
}

/* The nodes a reference names in the binding, as records. */
static void ref_records(Conditions *c, const CNode *n, PyObject *binding, CVal *out)
{
    PyObject *x = PyTuple_GET_ITEM(binding, n->slot);
    out->kind = 0, out->n = 0;
    if (x == Py_None)
        return;
    out->kind = 1;
    if (n->which == R_ONE) {
        out->one = x, out->records = &out->one, out->n = 1;
        return;
    }
    Py_ssize_t k = PyTuple_GET_SIZE(x);
    PyObject *const *items = &PyTuple_GET_ITEM(x, 0);
    switch (n->which) {
    case R_FIRST: out->records = items, out->n = k ? 1 : 0; break;
    case R_LAST: out->records = items + (k ? k - 1 : 0), out->n = k ? 1 : 0; break;
    case R_ALL: out->records = items, out->n = k; break;
    default: /* R_PREV */
        if (k >= 2) {
            out->records = items + k - 2, out->n = 1;
        } else if (k == 1 && c->width + n->group < PyTuple_GET_SIZE(binding)) {
            PyObject *entry = PyTuple_GET_ITEM(binding, c->width + n->group);
            if (entry != Py_None && PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 0)) != -1)
                out->one = entry, out->records = &out->one, out->n = 1;
        }
    }
}

/* Item i of a value: its string (borrowed, NULL for a number alone) and number. */
static int cval_item(Conditions *c, CVal *v, Py_ssize_t i, PyObject **text, double *x)
{
    if (v->kind == 2) {
        *text = NULL, *x = v->num;
        return 1;
    }
    if (v->kind == 4 || v->kind == 5) {
        *text = v->kind == 4 ? v->pair : PyList_GET_ITEM(v->pair, i);
        return string_number(*text, x);
    }
    if (v->kind == 3) {
        *text = PyTuple_GET_ITEM(v->pair, 0);
        PyObject *number = PyTuple_GET_ITEM(v->pair, 1);
        return number == Py_None ? 0 : (*x = PyFloat_AsDouble(number), 1);
    }
    PyObject *record = v->records[i];
    if (v->at < 0) {
        *text = PyTuple_GET_ITEM(record, 2);
        return *text == Py_None ? -1 : string_number(*text, x);
    }
    *text = PyTuple_GET_ITEM(record, HEAD + v->at);
    if (*text == Py_None)
        return -1; /* (no such attribute: no value) */
    PyObject *number = PyTuple_GET_ITEM(record, c->numbers_at + v->at);
    return number == Py_None ? 0 : (*x = PyFloat_AS_DOUBLE(number), 1);
}

static Py_ssize_t cval_count(CVal *v)
{
    return v->kind == 0 ? 0 : v->kind == 1 ? v->n : v->kind == 5 ? PyList_GET_SIZE(v->pair) : 1;
}

static int cond_holds(Conditions *c, int at, PyObject *binding);

static int cond_value(Conditions *c, int at, PyObject *binding, CVal *out)
{
    const CNode *n = &c->nodes[at];
    out->kind = 0, out->pair = NULL;
    switch (n->kind) {
    case C_CONST:
        out->kind = 3, out->pair = n->obj;
        return 0;
    case C_PATH: /* (a pending check's) */
        if (c->record == NULL)
            return PyErr_SetString(PyExc_ValueError, "Conditions: a pending check's, on no record"), -1;
        out->kind = 5, out->pair = PyTuple_GET_ITEM(c->record, n->at);
        return 0;
    case C_OPEN: { /* (a guard's) */
        if (c->open == NULL)
            return PyErr_SetString(PyExc_ValueError, "Conditions: a guard's, on no open tag"), -1;
        PyObject *value = open_attribute(c->open, n->obj);
        if (value != NULL && value != Py_None)
            out->kind = 4, out->pair = value;
        return PyErr_Occurred() ? -1 : 0;
    }
    case C_FIELD:
    case C_TAG:
        ref_records(c, n, binding, out);
        out->at = n->kind == C_TAG ? -1 : n->at;
        return 0;
    case C_ARITH: { /* the first value of each side, as numbers */
        double v[2];
        for (int side = 0; side < 2; side++) {
            CVal operand;
            PyObject *text;
            if (cond_value(c, side ? n->right : n->left, binding, &operand) < 0)
                return -1;
            Py_ssize_t first = 0, count = cval_count(&operand);
            int has = -1;
            while (first < count && (has = cval_item(c, &operand, first, &text, &v[side])) < 0)
                first++; /* (a record without the attribute has no value) */
            if (first == count || has <= 0)
                return 0;
        }
        double r = n->op == A_ADD ? v[0] + v[1] : n->op == A_SUB ? v[0] - v[1] : n->op == A_MUL ? v[0] * v[1]
                 : v[1] != 0 ? v[0] / v[1] : NAN;
        if (n->op == A_DIV && v[1] == 0)
            return 0; /* no value, as values.arith */
        out->kind = 2, out->num = r;
        return 0;
    }
    default:
        PyErr_SetString(PyExc_ValueError, "Conditions: a node that has no value");
        return -1;
    }
}

/* Two values, compared: numbers when both read as numbers (a finite number), else strings. */
static int compare_items(Conditions *c, int op, PyObject *a, double x, int hx, PyObject *b, double y, int hy)
{
    hx = hx && isfinite(x), hy = hy && isfinite(y);
    if (hx && hy) {
        switch (op) {
        case Py_LT: return x < y;
        case Py_LE: return x <= y;
        case Py_EQ: return x == y;
        case Py_NE: return x != y;
        case Py_GT: return x > y;
        default: return x >= y;
        }
    }
    PyObject *sa = a ? Py_NewRef(a) : NULL, *sb = b ? Py_NewRef(b) : NULL;
    if (sa == NULL) {
        PyObject *number = PyFloat_FromDouble(x);
        sa = number ? PyObject_CallOneArg(c->as_string, number) : NULL;
        Py_XDECREF(number);
    }
    if (sa != NULL && sb == NULL) {
        PyObject *number = PyFloat_FromDouble(y);
        sb = number ? PyObject_CallOneArg(c->as_string, number) : NULL;
        Py_XDECREF(number);
    }
    int r = sa && sb ? PyObject_RichCompareBool(sa, sb, op) : -1;
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    return r;
}

static int cond_holds(Conditions *c, int at, PyObject *binding)
{
    const CNode *n = &c->nodes[at];
    int r;
    switch (n->kind) {
    case C_CMP: {
        CVal a, b;
        if (cond_value(c, n->left, binding, &a) < 0 || cond_value(c, n->right, binding, &b) < 0)
            return -1;
        Py_ssize_t na = cval_count(&a), nb = cval_count(&b);
        for (Py_ssize_t i = 0; i < na; i++) {
            PyObject *sa, *sb;
            double x = 0, y = 0;
            int hx = cval_item(c, &a, i, &sa, &x);
            if (hx < 0)
                continue;
            for (Py_ssize_t k = 0; k < nb; k++) {
                int hy = cval_item(c, &b, k, &sb, &y);
                if (hy < 0)
                    continue;
                r = compare_items(c, n->op, sa, x, hx, sb, y, hy);
                if (r != 0)
                    return r;
            }
        }
        return 0;
    }
    case C_AND:
        r = cond_holds(c, n->left, binding);
        return r <= 0 ? r : cond_holds(c, n->right, binding);
    case C_OR:
        r = cond_holds(c, n->left, binding);
        return r != 0 ? r : cond_holds(c, n->right, binding);
    case C_NOT:
        r = cond_holds(c, n->left, binding);
        return r < 0 ? r : !r;
    case C_PATH: /* (a pending check's: the path has a value) */
        if (c->record == NULL)
            return PyErr_SetString(PyExc_ValueError, "Conditions: a pending check's, on no record"), -1;
        return PyList_GET_SIZE(PyTuple_GET_ITEM(c->record, n->at)) > 0;
    case C_HAS: /* (a guard's) */
        if (c->open == NULL)
            return PyErr_SetString(PyExc_ValueError, "Conditions: a guard's, on no open tag"), -1;
        return open_attribute(c->open, n->obj) != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
    case C_EXISTS: { /* the reference names nodes (with the attribute `at`, if any) */
        CVal v;
        ref_records(c, n, binding, &v);
        for (Py_ssize_t i = 0; i < v.n; i++)
            if (n->at < 0 || PyTuple_GET_ITEM(v.records[i], HEAD + n->at) != Py_None)
                return 1;
        return 0;
    }
    default:
        PyErr_SetString(PyExc_ValueError, "Conditions: a node that is no condition");
        return -1;
    }
}

static PyObject *conditions_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *binding;
    if (!PyArg_ParseTuple(args, "O!:Conditions", &PyTuple_Type, &binding))
        return NULL;
    Conditions *c = (Conditions *)self;
    if (PyTuple_GET_SIZE(binding) < c->width)
        return PyErr_SetString(PyExc_ValueError, "Conditions: a binding of its width"), NULL;
    int r = cond_holds(c, c->root, binding);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

static PyObject *conditions_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *nodes, *as_string;
    int root;
    Py_ssize_t width, numbers_at;
    if (!PyArg_ParseTuple(args, "O!innO:Conditions", &PyTuple_Type, &nodes, &root, &width, &numbers_at,
                          &as_string))
        return NULL;
    Conditions *c = (Conditions *)type->tp_alloc(type, 0);
    if (c == NULL)
        return NULL;
    c->nnodes = PyTuple_GET_SIZE(nodes);
    c->nodes = PyMem_Calloc((size_t)(c->nnodes ? c->nnodes : 1), sizeof *c->nodes);
    c->root = root, c->width = width, c->numbers_at = numbers_at;
    c->as_string = Py_NewRef(as_string);
    if (c->nodes == NULL) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < c->nnodes; i++) {
        CNode *n = &c->nodes[i];
        PyObject *obj;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(nodes, i), "iiiiiiiiO", &n->kind, &n->op, &n->which, &n->slot,
                              &n->at, &n->group, &n->left, &n->right, &obj)) {
            Py_DECREF(c);
            return NULL;
        }
        int reads = n->kind == C_FIELD || n->kind == C_TAG || n->kind == C_EXISTS;
        int opens = n->kind == C_OPEN || n->kind == C_HAS; /* (a guard's: obj the name) */
        int joins = n->kind == C_ARITH || n->kind == C_CMP || n->kind == C_AND || n->kind == C_OR;
        int bad = n->kind < C_CONST || n->kind > C_PATH || (opens && !PyUnicode_Check(obj)) ||
                  (n->kind == C_PATH && n->at < HEAD) ||
                  (reads && (n->slot < 0 || n->slot >= width || n->which < R_ONE || n->which > R_PREV ||
                             n->group < 0)) ||
                  ((joins || n->kind == C_NOT) && (n->left < 0 || n->left >= i)) ||
                  (joins && (n->right < 0 || n->right >= i)) ||
                  (n->kind == C_CONST && !(PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 2 &&
                                            PyUnicode_Check(PyTuple_GET_ITEM(obj, 0)) &&
                                            (PyTuple_GET_ITEM(obj, 1) == Py_None ||
                                             PyFloat_Check(PyTuple_GET_ITEM(obj, 1))))) ||
                  (n->kind == C_CMP && (n->op < Py_LT || n->op > Py_GE));
        if (bad) {
            Py_DECREF(c);
            return PyErr_Format(PyExc_ValueError, "Conditions: node %zd is not well formed", i);
        }
        n->obj = Py_NewRef(obj);
    }
    if (root < 0 || root >= c->nnodes) {
        Py_DECREF(c);
        return PyErr_Format(PyExc_ValueError, "Conditions: the root is not a node");
    }
    return (PyObject *)c;
}

static void conditions_dealloc(Conditions *c)
{
    for (Py_ssize_t i = 0; c->nodes != NULL && i < c->nnodes; i++)
        Py_XDECREF(c->nodes[i].obj);
    PyMem_Free(c->nodes);
    Py_XDECREF(c->as_string);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyTypeObject ConditionsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xseq._vm.Conditions",
    .tp_basicsize = sizeof(Conditions),
    .tp_dealloc = (destructor)conditions_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Conditions(nodes, root, width, numbers_at, as_string): a where clause's conditions "
              "on a binding's records (xcep/xseq/vm.py), called with a binding",
    .tp_call = conditions_call,
    .tp_new = conditions_new,
};

/* A binding's verdict: a Conditions object decides in C, another callable in Python. */
static int decide(PyObject *test, PyObject *binding)
{
    if (Py_TYPE(test) == &ConditionsType) {
        Conditions *c = (Conditions *)test;
        return cond_holds(c, c->root, binding);
    }
    PyObject *verdict = PyObject_CallOneArg(test, binding);
    int holds = verdict ? PyObject_IsTrue(verdict) : -1;
    Py_XDECREF(verdict);
    return holds;
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

/* Whether the open tag passes a guard: a Conditions tree decided on its attributes in C, or
 * a test called with its attribute list; -1 on an error. */
static int passes(PyObject *guard, Attrs *attrs)
{
    if (Py_TYPE(guard) == &ConditionsType) {
        Conditions *c = (Conditions *)guard;
        c->open = attrs;
        int holds = cond_holds(c, c->root, NULL);
        c->open = NULL;
        return holds;
    }
    PyObject *raw = attrs_raw(attrs);
    PyObject *verdict = raw ? PyObject_CallOneArg(guard, raw) : NULL;
    int holds = verdict ? PyObject_IsTrue(verdict) : -1;
    Py_XDECREF(verdict);
    return holds;
}

/* ----- the frames and the queue ----- */

/* Room for `need` items of `size` bytes in the array *at of *cap (grown by doubling from
 * `first`; the new room zeroed). */
static int grow(void **at, Py_ssize_t *cap, Py_ssize_t need, size_t size, Py_ssize_t first)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t more = *cap ? *cap : first;
    while (more < need)
        more *= 2;
    char *grown = PyMem_Realloc(*at, (size_t)more * size);
    if (grown == NULL)
        return PyErr_NoMemory(), -1;
    memset(grown + (size_t)*cap * size, 0, (size_t)(more - *cap) * size);
    *at = grown, *cap = more;
    return 0;
}

static int push_frame(Vm *self, long long node, PyObject *tag)
{
    Context *c = RUN;
    if (c->depth == c->cap && grow((void **)&c->frames, &c->cap, c->depth + 1, sizeof *c->frames, c->key ? 4 : 32) < 0)
        return -1;
    Frame *f = &c->frames[c->depth++];
    f->node = node;
    f->tag = Py_XNewRef(tag);
    f->record = f->raw = f->made = NULL;
    f->serial = self->serials++;
    return 0;
}

static void frame_clear(Frame *f)
{
    for (int k = 0; k < WAITS; k++)
        threads_clear(&f->lists[k]);
    threads_clear(&f->collect);
    Py_CLEAR(f->tag);
    Py_CLEAR(f->record);
    Py_CLEAR(f->raw);
    Py_CLEAR(f->made);
}

static void frame_free(Frame *f)
{
    frame_clear(f);
    for (int k = 0; k < WAITS; k++)
        threads_free(&f->lists[k]);
    threads_free(&f->collect);
}

static void pop_frame(Vm *self)
{
    Frame *f = &RUN->frames[--RUN->depth];
    if (f->lists[W_DESC].len)
        RUN->descs--;
    if (f->lists[W_DTEXT].len)
        RUN->dtexts--;
    frame_clear(f);
}

/* partition by: a partitioned element opens inside another of the same partition, whose
 * run is inside an element: it is the next child of the partition's root, read on a stack
 * of its own (the root's frame shared) until it closes, when the stack is resumed. */
static int suspend(Vm *self)
{
    Context *c = RUN;
    Py_ssize_t k = c->depth - 1;
    if (grow((void **)&c->saved, &c->saved_cap, c->nsaved + k, sizeof *c->saved, 8) < 0 ||
        grow((void **)&c->cuts, &c->cuts_cap, c->ncuts + 2, sizeof *c->cuts, 8) < 0)
        return -1;
    memcpy(c->saved + c->nsaved, c->frames + 1, (size_t)k * sizeof *c->frames);
    memset(c->frames + 1, 0, (size_t)k * sizeof *c->frames); /* (the saved frames own them) */
    c->nsaved += k;
    c->cuts[c->ncuts++] = k;
    c->cuts[c->ncuts++] = c->skip;
    c->depth = 1, c->skip = 0;
    c->descs = c->frames[0].lists[W_DESC].len > 0;
    c->dtexts = c->frames[0].lists[W_DTEXT].len > 0;
    return 0;
}

static int resume(Vm *self)
{
    Context *c = RUN;
    Py_ssize_t skip = c->cuts[--c->ncuts], k = c->cuts[--c->ncuts];
    while (c->depth > 1)
        pop_frame(self);
    if (grow((void **)&c->frames, &c->cap, 1 + k, sizeof *c->frames, 4) < 0)
        return -1;
    for (Py_ssize_t d = 1; d <= k; d++) /* (the buffers of frames read since) */
        frame_free(&c->frames[d]);
    memcpy(c->frames + 1, c->saved + c->nsaved - k, (size_t)k * sizeof *c->frames);
    c->nsaved -= k;
    memset(c->saved + c->nsaved, 0, (size_t)k * sizeof *c->saved);
    c->depth = 1 + k, c->skip = skip, c->descs = c->dtexts = 0;
    for (Py_ssize_t d = 0; d < c->depth; d++) {
        c->descs += c->frames[d].lists[W_DESC].len > 0;
        c->dtexts += c->frames[d].lists[W_DTEXT].len > 0;
    }
    return 0;
}

/* Whether a frame is open: at its depth in its run's stack, or in a suspended one. */
static int frame_open(Vm *self, Py_ssize_t run, Py_ssize_t depth, long long serial)
{
    Context *c = &self->ctxs[run];
    if (depth < c->depth && c->frames[depth].serial == serial)
        return 1;
    for (Py_ssize_t i = 0; i < c->nsaved; i++)
        if (c->saved[i].serial == serial)
            return 1;
    for (Py_ssize_t d = 1; d < c->depth && depth == 0; d++) /* (0: suspended then; resumed since?) */
        if (c->frames[d].serial == serial)
            return 1;
    return 0;
}

static void clear_queue(Vm *self)
{
    for (Py_ssize_t i = self->qhead; i < self->qlen; i++) {
        Py_DECREF(self->queue[i].row);
        Py_XDECREF(self->queue[i].alts);
    }
    self->qhead = self->qlen = 0;
}

/* A match to the queue (the reference to its row is the queue's). */
static int enqueue(Vm *self, Entry entry)
{
    if (self->qhead > 0 && self->qhead == self->qlen)
        self->qhead = self->qlen = 0;
    if (self->qlen == self->qcap && self->qhead > 0) { /* room at the front: move there */
        memmove(self->queue, self->queue + self->qhead, (size_t)(self->qlen - self->qhead) * sizeof *self->queue);
        self->qlen -= self->qhead, self->qhead = 0;
    }
    if (self->qlen == self->qcap && grow((void **)&self->queue, &self->qcap, self->qlen + 1, sizeof *self->queue, 64) < 0)
        return -1;
    self->queue[self->qlen++] = entry;
    return 0;
}

static PyObject *row_of(Vm *self, PyObject *binding);
static void consider(Context *c, PyObject *x, Py_ssize_t *best, int depth);
static int decide_check(Vm *self, PyObject *check);

/* ----- selection policies (the choice itself is Python's: emitters.select_starts) ----- */

/* Whether (d, n) comes before the key *doc, *node (or there is none yet: !*set). */
static void earliest(long long d, long long n, long long *doc, long long *node, int *set)
{
    if (!*set || d < *doc || (d == *doc && n < *node))
        *doc = d, *node = n, *set = 1;
}

/* Where a binding's match starts: the first node its own variables bound (a Kleene-*
 * variable's first is its earliest), into *doc, *node, *set (kept when earlier). */
static void binding_start(Vm *self, PyObject *binding, long long *doc, long long *node, int *set)
{
    const char *own = PyBytes_AS_STRING(self->own);
    for (Py_ssize_t i = 0; i < self->width; i++) {
        PyObject *item = PyTuple_GET_ITEM(binding, i);
        if (!own[i] || item == Py_None || PyTuple_GET_SIZE(item) == 0)
            continue;
        PyObject *record = PyLong_Check(PyTuple_GET_ITEM(item, 0)) ? item : PyTuple_GET_ITEM(item, 0);
        earliest(record_field(record, 3), record_field(record, 0), doc, node, set);
    }
}

/* The floor of run `r` now: the earliest start of its threads that bound an own variable and
 * of its queued matches (the rows not handed out: a start a policy cannot decide yet). */
static void set_floor(Vm *self, Py_ssize_t r)
{
    Context *c = &self->ctxs[r];
    long long doc = 0, node = 0;
    int set = 0;
    for (Py_ssize_t f = 0; f < c->depth + c->nsaved; f++) {
        Frame *frame = f < c->depth ? &c->frames[f] : &c->saved[f - c->depth];
        for (int k = 0; k < WAITS; k++)
            for (Py_ssize_t i = 0; i < frame->lists[k].len; i++)
                binding_start(self, frame->lists[k].at[i].binding, &doc, &node, &set);
    }
    for (Py_ssize_t i = self->qhead; i < self->qlen; i++) {
        Entry *e = &self->queue[i];
        if (e->run != r)
            continue;
        int own = 0;
        long long d = 0, n = 0;
        binding_start(self, e->row, &d, &n, &own);
        if (own)
            earliest(d, n, &doc, &node, &set);
        else
            earliest(e->edoc, e->enode, &doc, &node, &set);
    }
    c->floor_doc = doc, c->floor_node = node, c->floor_set = set;
}

static PyObject *floor_of(Context *c)
{
    return c->floor_set ? Py_BuildValue("(LL)", c->floor_doc, c->floor_node) : Py_NewRef(Py_None);
}

/* A selection policy: the document read now broke off (its root never closed) — its matches
 * are dropped but those its floor at its last close decided: (run, None, document, floor). */
static int broke(Vm *self)
{
    if (self->own == NULL)
        return 0;
    PyObject *item = Py_BuildValue("(nOLN)", self->cur, Py_None, self->doc, floor_of(RUN));
    int failed = item == NULL || PyList_Append(self->out, item) < 0;
    Py_XDECREF(item);
    return failed ? -1 : 0;
}

/* Hand out the rows at the head of the queue whose nodes have all closed (partition by:
 * each with its partition's key). */
static int pump(Vm *self)
{
    while (self->qhead < self->qlen) {
        Entry *e = &self->queue[self->qhead];
        if (e->wait >= 0 && frame_open(self, e->run, e->wait, e->serial))
            break;
        if (e->alts != NULL) { /* its pending checks: one alternative must hold (as _Entry.resolve) */
            int holds = 0, waits = 0;
            for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(e->alts) && !holds; a++) {
                PyObject *checks = PyTuple_GET_ITEM(e->alts, a);
                int state = 1; /* 1: all hold, 2: none fails but one is open, 0: one fails */
                for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(checks) && state; k++) {
                    PyObject *check = PyTuple_GET_ITEM(checks, k);
                    Py_ssize_t open = PY_SSIZE_T_MAX;
                    if (PyList_GET_ITEM(check, 2) == Py_None)
                        consider(&self->ctxs[e->run], check, &open, 0);
                    if (open != PY_SSIZE_T_MAX) { /* its nodes are open yet */
                        state = 2;
                        continue;
                    }
                    int verdict = decide_check(self, check);
                    if (verdict < 0)
                        return -1;
                    state = verdict ? state : 0;
                }
                holds = state == 1, waits |= state == 2;
            }
            if (!holds && waits)
                break; /* undecided: the rows behind it wait too */
            Py_CLEAR(e->alts);
            if (!holds) {
                Py_DECREF(e->row);
                self->qhead++;
                continue;
            }
        }
        PyObject *row = row_of(self, e->row); /* (made now: the values below its nodes are read) */
        if (row != NULL && self->nroute)
            Py_SETREF(row, Py_BuildValue("(OO)", self->ctxs[e->run].key, row));
        if (row != NULL && self->own != NULL) { /* (run, start, end, row): the policy picks */
            long long doc = e->edoc, node = e->enode;
            int set = 0;
            binding_start(self, e->row, &doc, &node, &set);
            if (!set)
                doc = e->edoc, node = e->enode;
            Py_SETREF(row, Py_BuildValue("(n(LL)(LL)O)", e->run, doc, node, e->edoc, e->enode, row));
        }
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
    return PyTuple_GET_ITEM(record, HEAD + index);
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
    Py_ssize_t paths_at = HEAD + PyTuple_GET_SIZE(self->attributes);
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
        if (PyLong_AsLong(PyTuple_GET_ITEM(term, 0)) == T_PY) { /* (its value, or its values) */
            PyObject *made = PyObject_CallFunction(self->py_term, "OOi", PyTuple_GET_ITEM(term, 2), binding,
                                                   self->as_values);
            if (made == NULL)
                Py_CLEAR(row);
            else
                PyList_SET_ITEM(row, t, made);
            continue;
        }
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

static PyObject *with_item(PyObject *binding, Py_ssize_t i, PyObject *value);
static int decide(PyObject *test, PyObject *binding);

/* A pending check decided (once: its verdict kept in it): a predicate whose plan has a
 * Conditions tree on the record's paths in C, the others by decide_check. */
static int decide_check(Vm *self, PyObject *check)
{
    PyObject *number = PyList_GET_ITEM(check, 1), *verdict = PyList_GET_ITEM(check, 2);
    Py_ssize_t k = PyLong_AsSsize_t(number);
    if (verdict != Py_None || self->value_checks == NULL || k < 0 || k >= PyTuple_GET_SIZE(self->value_checks) ||
        PyTuple_GET_ITEM(self->value_checks, k) == Py_None)
        return decide(self->decide_check, check);
    Conditions *c = (Conditions *)PyTuple_GET_ITEM(self->value_checks, k);
    c->record = PyList_GET_ITEM(check, 0);
    int holds = cond_holds(c, c->root, NULL);
    c->record = NULL;
    if (holds >= 0 && PyList_SetItem(check, 2, PyBool_FromLong(holds)) < 0)
        return -1;
    return holds;
}

/* The open node of a record, a tuple of records, a check or a binding inside a check that
 * closes last: *best, its place in the order frames close (see wait_of). */
static void consider(Context *c, PyObject *x, Py_ssize_t *best, int depth)
{
    if (x == Py_None || depth > 16)
        return;
    if (PyList_Check(x)) { /* a check: its node's record, or the binding it decides on */
        PyObject *subject = PyList_GET_ITEM(x, 0);
        if (PyTuple_GET_SIZE(subject) && PyLong_Check(PyTuple_GET_ITEM(subject, 0))) {
            consider(c, subject, best, depth + 1);
            return;
        }
        /* (not the binding's own checks: those the binding holding this check holds too) */
        for (Py_ssize_t k = 0; k + 1 < PyTuple_GET_SIZE(subject); k++)
            consider(c, PyTuple_GET_ITEM(subject, k), best, depth + 1);
        return;
    }
    if (!PyTuple_Check(x) || PyTuple_GET_SIZE(x) == 0)
        return;
    if (!PyLong_Check(PyTuple_GET_ITEM(x, 0))) { /* records, checks, a binding's items */
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(x); k++)
            consider(c, PyTuple_GET_ITEM(x, k), best, depth + 1);
        return;
    }
    Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(x, 1));
    if (d <= 0) /* (a root: a group's entry) */
        return;
    if (d < c->depth && c->frames[d].record == x) {
        if (c->nsaved + d < *best)
            *best = c->nsaved + d;
        return;
    }
    for (Py_ssize_t j = 0; j < c->nsaved && j < *best; j++)
        if (c->saved[j].record == x) {
            *best = j;
            return;
        }
}

/* A thread's pending checks whose nodes have all closed, decided (as automaton.py's
 * _live_checks): 0 if one is false (the thread dies), else 1 with *binding the binding
 * without those that hold (a new reference in place of the old), -1 on an error. */
static int prune_checks(Vm *self, PyObject **binding)
{
    Py_ssize_t last = PyTuple_GET_SIZE(*binding) - 1;
    PyObject *checks = PyTuple_GET_ITEM(*binding, last), *live = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(checks), kept = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *check = PyTuple_GET_ITEM(checks, k);
        Py_ssize_t best = PY_SSIZE_T_MAX;
        if (PyList_GET_ITEM(check, 2) == Py_None)
            consider(RUN, check, &best, 0);
        int holds = best == PY_SSIZE_T_MAX ? decide_check(self, check) : 2; /* 2: open */
        if (holds <= 0) {
            Py_XDECREF(live);
            return holds;
        }
        if (holds == 2 && live == NULL)
            continue;
        if (live == NULL) { /* the first that holds: those before it are kept */
            if ((live = PyTuple_New(n)) == NULL)
                return -1;
            for (Py_ssize_t j = 0; j < k; j++)
                PyTuple_SET_ITEM(live, kept++, Py_NewRef(PyTuple_GET_ITEM(checks, j)));
        }
        if (holds == 2)
            PyTuple_SET_ITEM(live, kept++, Py_NewRef(check));
    }
    if (live == NULL)
        return 1;
    PyObject *shorter = PyTuple_GetSlice(live, 0, kept);
    Py_DECREF(live);
    PyObject *pruned = shorter ? with_item(*binding, last, shorter) : NULL;
    Py_XDECREF(shorter);
    if (pruned == NULL)
        return -1;
    Py_SETREF(*binding, pruned);
    return 1;
}

/* Where a match's row waits: for the frame of its nodes still open (its end node, at
 * depth `end`, those its binding holds, those its pending checks read) that closes last —
 * a suspended stack's before the stack read now, the oldest first, and in a stack the
 * lowest; wait -1 when none is. */
static Entry wait_of(Vm *self, PyObject *binding, Py_ssize_t end, PyObject *alts)
{
    Context *c = RUN;
    Entry entry = {-1, self->cur, 0, binding, NULL};
    Py_ssize_t best = end > 0 ? c->nsaved + end : PY_SSIZE_T_MAX; /* (a place in that order) */
    for (Py_ssize_t i = 0; i < self->width; i++)
        consider(c, PyTuple_GET_ITEM(binding, i), &best, 0);
    if (alts != NULL)
        consider(c, alts, &best, 0);
    if (best == PY_SSIZE_T_MAX)
        return entry;
    Frame *f = best < c->nsaved ? &c->saved[best] : &c->frames[best - c->nsaved];
    entry.wait = best < c->nsaved ? 0 : best - c->nsaved, entry.serial = f->serial;
    return entry;
}

/* ----- the closure ----- */

/* ----- elements written out (their XML or string value) ----- */

/* A string escaped by `escape` when it has a character that needs it. */
static PyObject *escaped(PyObject *escape, PyObject *text, const char *special)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    for (const char *c = special; *c; c++)
        if (PyUnicode_FindChar(text, (Py_UCS4)(unsigned char)*c, 0, n, 1) != -1)
            return PyObject_CallOneArg(escape, text);
    return NULL; /* (none: the caller uses text) */
}

/* The parts list an element's writing goes to: the last value of the record's path. */
static PyObject *parts_of(Vm *self, PyObject *record, Py_ssize_t path)
{
    PyObject *values = PyTuple_GET_ITEM(record, HEAD + PyTuple_GET_SIZE(self->attributes) + path);
    return PyList_GET_ITEM(values, PyList_GET_SIZE(values) - 1);
}

/* An open tag `<tag a="v"` written to parts (its '>' left open: None, until the next part
 * says whether it has content); nothing but texts count for a string value. */
static int write_open(Vm *self, PyObject *parts, int kind, PyObject *tag, Attrs *attrs, long long node)
{
    if (kind == P_EVENTS) { /* (tag, its attributes, its node) */
        PyObject *raw = attrs_raw(attrs), *open = raw ? Py_BuildValue("(OOL)", tag, raw, node) : NULL;
        int failed = open == NULL || PyList_Append(parts, open) < 0;
        Py_XDECREF(open);
        return failed ? -1 : 0;
    }
    if (self->as_text || kind == P_STRING)
        return 0;
    if (PyList_GET_SIZE(parts) && PyList_GET_ITEM(parts, PyList_GET_SIZE(parts) - 1) == Py_None &&
        PyList_SetItem(parts, PyList_GET_SIZE(parts) - 1, PyUnicode_FromString(">")) < 0)
        return -1;
    PyObject *open = PyUnicode_FromFormat("<%U", tag);
    int failed = open == NULL || PyList_Append(parts, open) < 0;
    Py_XDECREF(open);
    PyObject *raw = failed ? NULL : attrs_raw(attrs);
    for (Py_ssize_t k = 0; raw != NULL && k < PyList_GET_SIZE(raw) && !failed; k++) {
        PyObject *item = PyList_GET_ITEM(raw, k), *value = PyTuple_GET_ITEM(item, 1);
        PyObject *quoted = value == Py_None ? PyUnicode_FromString("\"\"") : escaped(self->quoteattr, value, "&<>\"'\n\r\t");
        if (quoted == NULL && !PyErr_Occurred())
            quoted = PyUnicode_FromFormat("\"%U\"", value);
        PyObject *written = quoted ? PyUnicode_FromFormat(" %U=%U", PyTuple_GET_ITEM(item, 0), quoted) : NULL;
        failed = written == NULL || PyList_Append(parts, written) < 0;
        Py_XDECREF(quoted);
        Py_XDECREF(written);
    }
    return failed || raw == NULL || PyList_Append(parts, Py_None) < 0 ? -1 : 0;
}

static int write_text(Vm *self, PyObject *parts, int kind, PyObject *value, long long node)
{
    if (kind == P_EVENTS) { /* (its value, its node) */
        PyObject *text = Py_BuildValue("(OL)", value, node);
        int failed = text == NULL || PyList_Append(parts, text) < 0;
        Py_XDECREF(text);
        return failed ? -1 : 0;
    }
    if (self->as_text || kind == P_STRING)
        return PyList_Append(parts, value);
    Py_ssize_t last = PyList_GET_SIZE(parts) - 1;
    if (last >= 0 && PyList_GET_ITEM(parts, last) == Py_None &&
        PyList_SetItem(parts, last, PyUnicode_FromString(">")) < 0)
        return -1;
    PyObject *text = escaped(self->escape, value, "&<>");
    if (text == NULL && PyErr_Occurred())
        return -1;
    int failed = PyList_Append(parts, text ? text : value) < 0;
    Py_XDECREF(text);
    return failed ? -1 : 0;
}

static int write_close(Vm *self, PyObject *parts, int kind, PyObject *tag)
{
    if (kind == P_EVENTS)
        return PyList_Append(parts, Py_None);
    if (self->as_text || kind == P_STRING)
        return 0;
    Py_ssize_t last = PyList_GET_SIZE(parts) - 1;
    if (last >= 0 && PyList_GET_ITEM(parts, last) == Py_None) /* no content: <tag/> */
        return PyList_SetItem(parts, last, PyUnicode_FromString("/>"));
    PyObject *close = PyUnicode_FromFormat("</%U>", tag);
    int failed = close == NULL || PyList_Append(parts, close) < 0;
    Py_XDECREF(close);
    return failed ? -1 : 0;
}

/* The element of the frame on top begins to be written as a value of the record's path. */
static int start_writing(Vm *self, Threads *into, PyObject *record, Py_ssize_t path, PyObject *tag, Attrs *attrs,
                         long long node)
{
    PyObject *values = PyTuple_GET_ITEM(record, HEAD + PyTuple_GET_SIZE(self->attributes) + path);
    PyObject *parts = PyList_New(0);
    int failed = parts == NULL || PyList_Append(values, parts) < 0;
    Py_XDECREF(parts);
    if (failed || write_open(self, parts, self->path_kind[path], tag, attrs, node) < 0)
        return -1;
    return threads_push(into, (int32_t)(path << 8 | WRITING), record);
}

/* The frame on top closes: what its collectors write ends here (an element written whole
 * becomes its string). */
static int stop_writing(Vm *self)
{
    Frame *frame = &RUN->frames[RUN->depth - 1];
    for (Py_ssize_t i = 0; i < frame->collect.len; i++) {
        int32_t code = frame->collect.at[i].state, path = code >> 8;
        if ((code & 0xFF) < WRITING_INSIDE)
            continue;
        PyObject *record = frame->collect.at[i].binding, *parts = parts_of(self, record, path);
        if (write_close(self, parts, self->path_kind[path], frame->tag) < 0)
            return -1;
        if ((code & 0xFF) == WRITING && (self->path_kind[path] == P_XML || self->path_kind[path] == P_STRING)) {
            /* (events stay a list) */
            PyObject *empty = PyUnicode_FromString(""), *whole = empty ? PyUnicode_Join(empty, parts) : NULL;
            Py_XDECREF(empty);
            PyObject *values = PyTuple_GET_ITEM(record, HEAD + PyTuple_GET_SIZE(self->attributes) + path);
            if (whole == NULL || PyList_SetItem(values, PyList_GET_SIZE(values) - 1, whole) < 0)
                return -1;
        }
    }
    return 0;
}

static PyObject *record_of(Vm *self, Py_ssize_t f, Attrs *attrs);

/* The node of frame f (open now) is captured, its events kept for the pending checks of
 * predicates on its subtree; its record, or NULL with an error. */
static PyObject *capture(Vm *self, Py_ssize_t f, Attrs *attrs)
{
    PyObject *record = record_of(self, f, attrs);
    if (record == NULL)
        return NULL;
    PyObject *values = PyTuple_GET_ITEM(record, HEAD + PyTuple_GET_SIZE(self->attributes) + self->capture_path);
    if (PyList_GET_SIZE(values) == 0 &&
        start_writing(self, &RUN->frames[f].collect, record, self->capture_path, RUN->frames[f].tag, attrs,
                      RUN->frames[f].node) < 0)
        return NULL;
    return record;
}

/* binding with item i replaced by value (a new reference). */
static PyObject *with_item(PyObject *binding, Py_ssize_t i, PyObject *value)
{
    Py_ssize_t n = PyTuple_GET_SIZE(binding);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++)
        PyTuple_SET_ITEM(out, k, Py_NewRef(k == i ? value : PyTuple_GET_ITEM(binding, k)));
    return out;
}

/* The binding with a pending check of each of `ids` on `subject` (a new reference): a
 * predicate of a match state on the subtree of its node (the record), or a condition of the
 * where clause that reads below nodes, at an iteration or per match (the binding then). */
static PyObject *with_checks(PyObject *ids, PyObject *subject, PyObject *binding)
{
    PyObject *record = subject;
    Py_ssize_t last = PyTuple_GET_SIZE(binding) - 1, k0 = PyTuple_GET_SIZE(PyTuple_GET_ITEM(binding, last));
    PyObject *checks = PyTuple_New(k0 + PyTuple_GET_SIZE(ids));
    for (Py_ssize_t k = 0; checks != NULL && k < k0; k++)
        PyTuple_SET_ITEM(checks, k, Py_NewRef(PyTuple_GET_ITEM(PyTuple_GET_ITEM(binding, last), k)));
    for (Py_ssize_t k = 0; checks != NULL && k < PyTuple_GET_SIZE(ids); k++) {
        PyObject *check = PyList_New(3);
        if (check == NULL) {
            Py_CLEAR(checks);
            break;
        }
        PyList_SET_ITEM(check, 0, Py_NewRef(record));
        PyList_SET_ITEM(check, 1, Py_NewRef(PyTuple_GET_ITEM(ids, k)));
        PyList_SET_ITEM(check, 2, Py_NewRef(Py_None));
        PyTuple_SET_ITEM(checks, k0 + k, check);
    }
    PyObject *out = checks ? with_item(binding, last, checks) : NULL;
    Py_XDECREF(checks);
    return out;
}

static PyObject *node_of(Vm *self, Py_ssize_t f);

/* The node of frame f (its record) begins to be written out, where slot `slot` writes its
 * nodes out and it is not written yet: 0, or -1 on an error. */
static int write_own(Vm *self, Py_ssize_t slot, Py_ssize_t f, PyObject *record, Attrs *attrs)
{
    if (self->xml_slots == NULL || !PyBytes_AS_STRING(self->xml_slots)[slot] || RUN->frames[f].node == -1)
        return 0;
    Py_ssize_t at = HEAD + PyTuple_GET_SIZE(self->attributes);
    for (Py_ssize_t p = 0; p < self->npaths; p++) {
        long end = PyLong_AsLong(PyTuple_GET_ITEM(PyTuple_GET_ITEM(self->paths, p), 1));
        if (self->path_at[p + 1] != self->path_at[p] || end != P_XML || PyList_GET_SIZE(PyTuple_GET_ITEM(record, at + p)))
            continue;
        Frame *frame = &RUN->frames[f];
        if (start_writing(self, &frame->collect, record, p, frame->tag, attrs, frame->node) < 0)
            return -1;
    }
    return 0;
}

static PyObject *record_of(Vm *self, Py_ssize_t f, Attrs *attrs)
{
    Frame *frame = &RUN->frames[f];
    if (frame->record != NULL)
        return frame->record;
    Py_ssize_t n = PyTuple_GET_SIZE(self->attributes);
    PyObject *record = PyTuple_New(HEAD + n + self->npaths + (self->numbers ? n : 0) + self->made);
    if (record == NULL)
        return NULL;
    if (self->made) { /* (for conditions that read above the node) */
        PyObject *made = node_of(self, f);
        if (made == NULL)
            return Py_DECREF(record), NULL;
        PyTuple_SET_ITEM(record, PyTuple_GET_SIZE(record) - 1, Py_NewRef(made));
    }
    for (Py_ssize_t p = 0; p < self->npaths; p++) { /* the values of the paths below it */
        PyObject *values = PyList_New(0);
        if (values == NULL)
            return Py_DECREF(record), NULL;
        PyTuple_SET_ITEM(record, HEAD + n + p, values);
    }
    PyTuple_SET_ITEM(record, 0, PyLong_FromLongLong(frame->node));
    PyTuple_SET_ITEM(record, 1, PyLong_FromSsize_t(f));
    PyTuple_SET_ITEM(record, 2, Py_NewRef(frame->tag ? frame->tag : Py_None));
    PyTuple_SET_ITEM(record, 3, PyLong_FromLongLong(self->doc));
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
        PyTuple_SET_ITEM(record, HEAD + k, Py_NewRef(value));
        if (self->numbers) { /* its number, or None (values.to_number) */
            double x;
            PyObject *number = value != Py_None && string_number(value, &x) ? PyFloat_FromDouble(x) : Py_NewRef(Py_None);
            if (number == NULL)
                return Py_DECREF(record), NULL;
            PyTuple_SET_ITEM(record, HEAD + n + self->npaths + k, number);
        }
    }
    if ((n && raw == NULL) || PyErr_Occurred() || !PyTuple_GET_ITEM(record, 0) || !PyTuple_GET_ITEM(record, 1) ||
        !PyTuple_GET_ITEM(record, 3)) {
        Py_DECREF(record);
        return NULL;
    }
    for (Py_ssize_t p = 0; frame->node != -1 && p < self->npaths; p++) { /* the paths go on below it */
        long end = PyLong_AsLong(PyTuple_GET_ITEM(PyTuple_GET_ITEM(self->paths, p), 1));
        if (end == P_EVENTS)
            continue; /* (captured only for a pending check: capture) */
        int own = self->path_at[p + 1] == self->path_at[p] && end == P_XML; /* the node itself */
        if (own && self->xml_slots != NULL)
            continue; /* (written once a slot that writes it out binds it: write_own) */
        int failed = own ? start_writing(self, &frame->collect, record, p, frame->tag, attrs, frame->node) < 0
                         : threads_push(&frame->collect, (int32_t)(p << 8 | (self->path_at[p + 1] > self->path_at[p])),
                                        record) < 0;
        if (failed)
            return Py_DECREF(record), NULL;
    }
    return frame->record = record;
}

/* The per-match conditions a match state decides once it binds their last variable (a
 * thread whose match cannot hold dies early): 1 if they hold, 0 if not, -1 on an error. */
static int decided_early(Vm *self, int32_t s, PyObject *binding)
{
    PyObject *tests = self->early == NULL ? Py_None : PyList_GET_ITEM(self->early, s);
    for (Py_ssize_t i = 0; tests != Py_None && i < PyTuple_GET_SIZE(tests); i++) {
        PyObject *test = PyTuple_GET_ITEM(PyTuple_GET_ITEM(tests, i), 0);
        PyObject *slots = PyTuple_GET_ITEM(PyTuple_GET_ITEM(tests, i), 1);
        int ready = 1;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots) && ready; k++)
            ready = PyTuple_GET_ITEM(binding, PyLong_AsSsize_t(PyTuple_GET_ITEM(slots, k))) != Py_None;
        int holds = ready ? decide(test, binding) : 1;
        if (holds <= 0)
            return holds;
    }
    return 1;
}

/* The table of the threads seen, made for a closure that has many (their hashes computed
 * then: `hashed` says they are), or made larger. */
static int seen_table(Vm *self, int hashed)
{
    Py_ssize_t cap = self->seen_cap ? self->seen_cap : 64;
    while (2 * (self->seen.len + 1) > cap)
        cap *= 2;
    if (grow((void **)&self->seen_hash, &self->seen_hash_cap, self->seen.len + 1, sizeof *self->seen_hash, 64) < 0)
        return -1;
    for (Py_ssize_t i = 0; !hashed && i < self->seen.len; i++)
        self->seen_hash[i] = thread_hash(self->seen.at[i].state, self->seen.at[i].binding);
    Py_ssize_t *at = PyMem_Calloc((size_t)cap, sizeof *at);
    if (at == NULL)
        return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < self->seen.len; i++) {
        Py_ssize_t k = (Py_ssize_t)((Py_uhash_t)self->seen_hash[i] & (Py_uhash_t)(cap - 1));
        while (at[k])
            k = (k + 1) & (cap - 1);
        at[k] = i + 1;
    }
    PyMem_Free(self->seen_at);
    self->seen_at = at, self->seen_cap = cap;
    return 0;
}

/* A binding made in the closure (a new reference, or NULL with an error) becomes *binding,
 * held by the threads seen (as state -1: none is ever equal to it); 1 on an error. */
static int hold(Vm *self, PyObject *made, PyObject **binding)
{
    if (made == NULL || threads_push(&self->seen, -1, made) < 0) {
        Py_XDECREF(made);
        return 1;
    }
    Py_DECREF(made);
    *binding = made;
    return 0;
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
/* The node of frame f of the run (borrowed), made with its ancestors' the first time a
 * predicate that reads above its node asks (a partition's root: the document node). */
static PyObject *node_of(Vm *self, Py_ssize_t f)
{
    Frame *frame = &RUN->frames[f];
    if (frame->made != NULL)
        return frame->made;
    PyObject *parent = f > 0 ? node_of(self, f - 1) : Py_None;
    long long doc = f == 0 && RUN->key != NULL ? -1 : self->doc;
    if (parent == NULL)
        return NULL;
    frame->made = PyObject_CallFunction(self->make_node, "OOOLL", parent, frame->tag ? frame->tag : Py_None,
                                        frame->raw ? frame->raw : Py_None, frame->node, doc);
    return frame->made;
}

/* Whether the predicates of state s that read above the node hold on the node at frame
 * `here` (1), not (0), or -1 on an error. */
static int holds_above(Vm *self, int32_t s, Py_ssize_t here)
{
    PyObject *ids = PyList_GET_ITEM(self->up, s);
    if (ids == Py_None)
        return 1;
    PyObject *node = node_of(self, here), *verdict = NULL;
    if (node != NULL && self->text_value != NULL) /* a text() step's: on the text node */
        verdict = PyObject_CallFunction(self->up_check, "OOOLL", ids, node, self->text_value, self->text_node, self->doc);
    else if (node != NULL)
        verdict = PyObject_CallFunctionObjArgs(self->up_check, ids, node, NULL);
    int holds = verdict ? PyObject_IsTrue(verdict) : -1;
    Py_XDECREF(verdict);
    return holds;
}

/* Whether two tuples of pending checks hold the same checks. */
static int same_checks(PyObject *x, PyObject *y)
{
    if (PyTuple_GET_SIZE(x) != PyTuple_GET_SIZE(y))
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(x); k++)
        if (PyTuple_GET_ITEM(x, k) != PyTuple_GET_ITEM(y, k))
            return 0;
    return 1;
}

/* intersect: the binding going on from a join with every combination of the checks the
 * other operands arrived with, after its own (as the automaton's joins). */
static int join_checks(Vm *self, int32_t s, PyObject *binding, PyObject *arrivals, long branch)
{
    Py_ssize_t operands = PyList_GET_SIZE(arrivals), last = PyTuple_GET_SIZE(binding) - 1;
    Py_ssize_t at[32] = {0};
    for (;;) {
        PyObject *checks = PySequence_List(PyTuple_GET_ITEM(binding, last));
        for (Py_ssize_t b = 0; checks != NULL && b < operands; b++)
            if (b != branch) {
                PyObject *theirs = PyList_GET_ITEM(PyList_GET_ITEM(arrivals, b), at[b]);
                if (PyList_SetSlice(checks, PyList_GET_SIZE(checks), PyList_GET_SIZE(checks), theirs) < 0)
                    Py_CLEAR(checks);
            }
        PyObject *joined = checks ? PyList_AsTuple(checks) : NULL;
        PyObject *going = joined ? with_item(binding, last, joined) : NULL;
        int failed = going == NULL || push_next(self, s, going) < 0;
        Py_XDECREF(checks), Py_XDECREF(joined), Py_XDECREF(going);
        if (failed)
            return -1;
        Py_ssize_t b = 0; /* the next combination */
        for (; b < operands; b++) {
            if (b == branch)
                continue;
            if (++at[b] < PyList_GET_SIZE(PyList_GET_ITEM(arrivals, b)))
                break;
            at[b] = 0;
        }
        if (b == operands)
            return 0;
    }
}

/* intersect: a binding at the join of operand `branch` of its group; it goes on when every
 * operand reached this node with the same variables from the same context node (as the
 * automaton's joins: bindings of the same slots and group entry) — once, or with pending
 * checks once per new combination of the operands' checks. */
static int joined(Vm *self, int32_t s, PyObject *binding)
{
    PyObject *spec = PyList_GET_ITEM(self->joins, s);
    int32_t group = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    long branch = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1)), width = PyLong_AsLong(PyTuple_GET_ITEM(spec, 2));
    PyObject *context = PyTuple_GET_ITEM(binding, self->width + group);
    Py_ssize_t i = 0;
    for (; i < self->joined.len; i++) {
        Thread *t = &self->joined.at[i];
        if (t->state == group && PyTuple_GET_ITEM(t->binding, self->width + group) == context &&
            binding_equal(t->binding, binding, self->width))
            break;
    }
    if (i == self->joined.len) {
        if (grow((void **)&self->reached, &self->reached_cap, i + 1, sizeof *self->reached, 16) < 0 ||
            threads_push(&self->joined, group, binding) < 0)
            return -1;
        self->reached[i].operands = 0;
        self->reached[i].arrivals = NULL;
        if (self->deep != NULL) {
            PyObject *arrivals = self->reached[i].arrivals = PyList_New(width);
            for (long b = 0; arrivals != NULL && b < width; b++) {
                PyObject *none = PyList_New(0);
                if (none == NULL)
                    return -1;
                PyList_SET_ITEM(arrivals, b, none);
            }
            if (arrivals == NULL)
                return -1;
        }
    }
    Reached *r = &self->reached[i];
    uint32_t was = r->operands, all = width >= 32 ? UINT32_MAX : ((uint32_t)1 << width) - 1;
    r->operands |= (uint32_t)1 << branch;
    if (r->arrivals == NULL)
        return r->operands != was && r->operands == all ? push_next(self, s, binding) : 0;
    PyObject *checks = PyTuple_GET_ITEM(binding, PyTuple_GET_SIZE(binding) - 1);
    PyObject *mine = PyList_GET_ITEM(r->arrivals, branch);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(mine); k++)
        if (same_checks(PyList_GET_ITEM(mine, k), checks))
            return 0;
    if (PyList_Append(mine, checks) < 0)
        return -1;
    return r->operands == all ? join_checks(self, s, binding, r->arrivals, branch) : 0;
}

/* The closure's joins forgotten (a closure's are its own). */
static void clear_joins(Vm *self)
{
    for (Py_ssize_t i = 0; i < self->joined.len; i++)
        Py_CLEAR(self->reached[i].arrivals);
    threads_clear(&self->joined);
}

static PyObject *leaf_record(Vm *self, long long node, PyObject *value);

static int closure(Vm *self, Py_ssize_t here, Py_ssize_t child, Py_ssize_t sibling, Attrs *attrs)
{
    int failed = 0;
    self->seen.len = 0;
    self->nmatches = 0;
    int hashed = 0; /* whether the threads seen are in the table (a closure of many) */
    while (self->stack.len && !failed) {
        Thread item = self->stack.at[--self->stack.len];
        int32_t s = item.state;
        int known = 0;
        if (self->deep != NULL && PyTuple_GET_SIZE(PyTuple_GET_ITEM(item.binding, PyTuple_GET_SIZE(item.binding) - 1))) {
            int live = prune_checks(self, &item.binding);
            if (live <= 0) {
                failed = live < 0;
                Py_DECREF(item.binding);
                continue;
            }
        }
        if (!hashed && self->seen.len < 8) { /* few: compared one by one */
            for (Py_ssize_t i = 0; i < self->seen.len && !known; i++)
                known = self->seen.at[i].state == s &&
                        binding_equal(self->seen.at[i].binding, item.binding, PyTuple_GET_SIZE(item.binding));
        } else {
            if ((!hashed || 2 * (self->seen.len + 1) > self->seen_cap) && seen_table(self, hashed) < 0) {
                failed = 1;
                Py_DECREF(item.binding);
                continue;
            }
            hashed = 1;
            Py_hash_t h = thread_hash(s, item.binding);
            Py_ssize_t mask = self->seen_cap - 1, at = (Py_ssize_t)((Py_uhash_t)h & (Py_uhash_t)mask);
            for (; self->seen_at[at] && !known; at = (at + 1) & mask) {
                Py_ssize_t i = self->seen_at[at] - 1;
                known = self->seen_hash[i] == h && self->seen.at[i].state == s &&
                        binding_equal(self->seen.at[i].binding, item.binding, PyTuple_GET_SIZE(item.binding));
            }
            if (!known) {
                if (grow((void **)&self->seen_hash, &self->seen_hash_cap, self->seen.len + 1,
                         sizeof *self->seen_hash, 64) < 0) {
                    failed = 1;
                    Py_DECREF(item.binding);
                    continue;
                }
                self->seen_hash[self->seen.len] = h;
                self->seen_at[at] = self->seen.len + 1;
            }
        }
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
            Threads *list = &RUN->frames[f].lists[self->mode[s]];
            if (self->mode[s] == W_DESC && list->len == 0)
                RUN->descs++;
            if (self->mode[s] == W_DTEXT && list->len == 0)
                RUN->dtexts++;
            failed = threads_push(list, s, binding) < 0;
            break;
        }
        case S_MATCH:
            if (self->self_tests != NULL && PyList_GET_ITEM(self->self_tests, s) != Py_None) {
                PyObject *test = PyList_GET_ITEM(self->self_tests, s), *name = PyTuple_GET_ITEM(test, 0);
                PyObject *tag = RUN->frames[here].tag; /* (NULL: a document's or partition's root) */
                int passes = tag == NULL ? PyTuple_GET_ITEM(test, 1) == Py_True
                                         : name == Py_None || PyUnicode_Compare(tag, name) == 0;
                if (!passes)
                    break;
            }
            if (self->checks != NULL && PyList_GET_ITEM(self->checks, s) != Py_None) {
                /* a predicate on the open tag not tested there (the step is entered after a
                 * choice): tested here, on the same attributes */
                int holds = passes(PyList_GET_ITEM(self->checks, s), attrs);
                if (holds <= 0) {
                    failed = holds < 0;
                    break;
                }
            }
            if (self->up != NULL) { /* predicates that read above the node */
                int holds = holds_above(self, s, here);
                if (holds <= 0) {
                    failed = holds < 0;
                    break;
                }
            }
            if (self->deep != NULL && PyList_GET_ITEM(self->deep, s) != Py_None) {
                PyObject *record = self->checks_on_events ? capture(self, here, attrs) : record_of(self, here, attrs);
                PyObject *ids = PyList_GET_ITEM(self->deep, s);
                if ((failed = hold(self, record ? with_checks(ids, record, binding) : NULL, &binding)))
                    break;
            }
            if (self->slot[s] >= 0) {
                int captured = self->captures != NULL && PyBytes_AS_STRING(self->captures)[self->slot[s]];
                PyObject *record = captured ? capture(self, here, attrs) : record_of(self, here, attrs);
                if (record != NULL && write_own(self, self->slot[s], here, record, attrs) < 0)
                    record = NULL;
                PyObject *bound = record ? bind(binding, self->slot[s], record, self->kleene[s]) : NULL;
                int holds = bound == NULL ? -1 : decided_early(self, s, bound);
                failed = holds < 0 || (holds && push_next(self, s, bound) < 0);
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
                int captured = self->captures != NULL && PyBytes_AS_STRING(self->captures)[self->slot[s]] && here;
                PyObject *record = captured ? capture(self, here, attrs) : record_of(self, here, attrs);
                PyObject *bound = record ? bind(binding, self->slot[s], record, 0) : NULL;
                failed = bound == NULL || push_next(self, s, bound) < 0;
                Py_XDECREF(bound);
            } else {
                failed = push_next(self, s, binding) < 0;
            }
            break;
        case S_IENTER: { /* intersect: the context node its operands run from */
            PyObject *record = record_of(self, here, attrs);
            PyObject *bound = record ? bind(binding, self->slot[s], record, 0) : NULL;
            failed = bound == NULL || push_next(self, s, bound) < 0;
            Py_XDECREF(bound);
            break;
        }
        case S_ATTR: { /* the node's attributes of the name (None: any), each the end node */
            PyObject *raw = attrs_raw(attrs), *name = PyList_GET_ITEM(self->tests, s);
            failed = raw == NULL;
            for (Py_ssize_t k = 0; !failed && k < PyList_GET_SIZE(raw); k++) {
                PyObject *attr = PyList_GET_ITEM(raw, k);
                if (name != Py_None && PyUnicode_Compare(PyTuple_GET_ITEM(attr, 0), name) != 0)
                    continue;
                if (self->leaves == NULL && (self->leaves = PyList_New(PyList_GET_SIZE(raw))) == NULL) {
                    failed = 1;
                    break;
                }
                PyObject *leaf = PyList_GET_ITEM(self->leaves, k); /* (one per attribute) */
                if (leaf == NULL) {
                    leaf = leaf_record(self, PyLong_AsLongLong(PyTuple_GET_ITEM(attr, 2)), PyTuple_GET_ITEM(attr, 1));
                    if (leaf == NULL) {
                        failed = 1;
                        break;
                    }
                    PyList_SET_ITEM(self->leaves, k, leaf);
                }
                PyObject *bound = bind(binding, self->end_slot, leaf, 0);
                failed = bound == NULL || push_next(self, s, bound) < 0;
                Py_XDECREF(bound);
            }
            break;
        }
        case S_JOIN: /* an operand's end: the run goes on once every operand reached here */
            failed = joined(self, s, binding) < 0;
            break;
        case S_ITER: /* the end of an iteration: its conditions */
            if (self->deep != NULL && PyList_GET_ITEM(self->deep, s) != Py_None) { /* read below */
                PyObject *checked = with_checks(PyList_GET_ITEM(self->deep, s), binding, binding);
                failed = checked == NULL || push_next(self, s, checked) < 0;
                Py_XDECREF(checked);
                break;
            }
            if (self->checks != NULL && PyList_GET_ITEM(self->checks, s) != Py_None) {
                int holds = decide(PyList_GET_ITEM(self->checks, s), binding);
                if (holds <= 0) {
                    failed = holds < 0;
                    break;
                }
            }
            failed = push_next(self, s, binding) < 0;
            break;
        case S_BEGIN: { /* the query's variables begin here (its pending checks go on) */
            Py_ssize_t last = PyTuple_GET_SIZE(binding) - 1;
            PyObject *checks = self->deep != NULL ? PyTuple_GET_ITEM(binding, last) : NULL;
            if (checks != NULL && PyTuple_GET_SIZE(checks)) {
                PyObject *begun = with_item(self->empty, last, checks);
                failed = begun == NULL || push_next(self, s, begun) < 0;
                Py_XDECREF(begun);
            } else {
                failed = push_next(self, s, self->empty) < 0;
            }
            break;
        }
        default: /* S_ACCEPT */
            if (self->deep != NULL && PyList_GET_ITEM(self->deep, s) != Py_None) { /* read below */
                PyObject *ids = PyList_GET_ITEM(self->deep, s);
                if ((failed = hold(self, with_checks(ids, binding, binding), &binding)))
                    break;
            }
            if (self->end_slot >= 0 && PyTuple_GET_ITEM(binding, self->end_slot) == Py_None) {
                /* the end node, bound (an attribute's was, at its step) */
                PyObject *record = self->text_value ? self->text_record : record_of(self, here, attrs);
                if (record != NULL && !self->text_value && write_own(self, self->end_slot, here, record, attrs) < 0)
                    record = NULL;
                if ((failed = hold(self, record ? bind(binding, self->end_slot, record, 0) : NULL, &binding)))
                    break;
            }
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
    clear_joins(self);
    Py_CLEAR(self->leaves);
    /* the matches that end here: each once (those of the same nodes are next to each other
     * once ordered: the variables' slots come first), in order, a row each */
    Py_ssize_t items = self->nmatches ? PyTuple_GET_SIZE(self->matches[0]) : 0;
    int pending = self->decide_check != Py_None; /* bindings end with their pending checks */
    sorted_items = items - pending;
    if (self->nmatches > 1)
        qsort(self->matches, (size_t)self->nmatches, sizeof *self->matches, compare_bindings);
    for (Py_ssize_t i = 0, end = 0; i < self->nmatches && !failed; i = end) {
        PyObject *binding = self->matches[i];
        PyObject *alts = NULL; /* pending checks: those of every run that found the match */
        for (end = i + 1; end < self->nmatches && binding_equal(binding, self->matches[end], self->width);)
            end++;
        if (pending && (alts = PyTuple_New(end - i)) == NULL) {
            failed = 1;
            break;
        }
        for (Py_ssize_t k = i; alts != NULL && k < end; k++)
            PyTuple_SET_ITEM(alts, k - i, Py_NewRef(PyTuple_GET_ITEM(self->matches[k], items - 1)));
        if (self->accept != Py_None) { /* its conditions, on its nodes' open tags */
            int holds = decide(self->accept, binding);
            failed = holds < 0;
            if (holds <= 0) {
                Py_XDECREF(alts);
                continue;
            }
        }
        Py_INCREF(binding);
        /* (its checks: decided at the pump; an end that is a text or an attribute: no
         * frame's, nothing to wait for) */
        PyObject *last = self->end_slot >= 0 ? PyTuple_GET_ITEM(binding, self->end_slot) : Py_None;
        int leaf = last != Py_None && record_field(last, 1) == 0;
        Entry entry = wait_of(self, binding, leaf ? 0 : here, NULL);
        entry.alts = alts;
        entry.enode = leaf ? record_field(last, 0) : RUN->frames[here].node; /* (a partition's
                                                                              * root: (-1, -1)) */
        entry.edoc = here == 0 && RUN->key != NULL ? -1 : self->doc;
        failed = enqueue(self, entry) < 0;
        if (failed) {
            Py_DECREF(binding);
            Py_XDECREF(alts);
        }
    }
    threads_clear(&self->seen);
    if (failed || PyErr_Occurred())
        return -1;
    return 0; /* (the rows go out at the next close, as the Python automaton pumps them) */
}

/* ----- events ----- */

/* The run `cur` begins at its root (a document's, or a partition's). */
static int begin_run(Vm *self)
{
    if (push_frame(self, -1, NULL) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < self->nstart; i++)
        if (threads_push(&self->stack, self->start[i], self->empty) < 0)
            return -1;
    Attrs none = {0};
    return closure(self, 0, 0, -1, &none);
}

static int close_element(Vm *self);

/* partition by: the partitioned elements a document leaves open (it broke off) close, the
 * innermost first, as their runs' stacks (their rows go out). */
static int close_routed(Vm *self)
{
    for (Py_ssize_t i = self->nrouting - 1; i > 0; i -= 2) { /* (pairs: depth, run) */
        self->cur = self->routing[i];
        while (RUN->depth > 1 || RUN->skip)
            if (close_element(self) < 0)
                return -1;
        if (RUN->ncuts && resume(self) < 0)
            return -1;
        if (self->own != NULL)
            set_floor(self, self->cur);
    }
    self->nrouting = 0, self->rdepth = 0;
    return 0;
}

static int start_document(Vm *self, long long doc)
{
    if (self->nroute) { /* the partitions' runs go on across documents */
        self->doc = doc, self->in_doc = 1;
        if (close_routed(self) < 0)
            return -1;
        self->masks[0] = 1; /* the document node: no step of the route yet */
        return 0;
    }
    if (RUN->depth > 1) { /* its root never closed: the document was malformed */
        clear_queue(self);
        if (self->in_doc && broke(self) < 0)
            return -1;
    }
    self->doc = doc, self->in_doc = 1;
    while (RUN->depth)
        pop_frame(self);
    RUN->skip = 0, RUN->descs = 0;
    return begin_run(self);
}

/* The run of the partition of `key`, begun when it is new; -1 with an error. */
static Py_ssize_t partition_of(Vm *self, PyObject *key)
{
    PyObject *found = PyDict_GetItemWithError(self->keys, key);
    if (found != NULL)
        return PyLong_AsSsize_t(found);
    if (PyErr_Occurred() ||
        grow((void **)&self->ctxs, &self->ctx_cap, self->nctx + 1, sizeof *self->ctxs, 8) < 0)
        return -1;
    PyObject *number = PyLong_FromSsize_t(self->nctx);
    if (number == NULL || PyDict_SetItem(self->keys, key, number) < 0) {
        Py_XDECREF(number);
        return -1;
    }
    Py_DECREF(number);
    self->cur = self->nctx++;
    RUN->key = Py_NewRef(key);
    return begin_run(self) < 0 ? -1 : self->cur;
}

/* The value of the partition's key attribute on the open tag (borrowed), or NULL. */
static PyObject *key_of(Vm *self, Attrs *a)
{
    if (a->raw == NULL) {
        for (Py_ssize_t i = a->first; i < a->end && a->kinds[i] == ATTR; i++)
            if (a->names[i] == self->route_key_id && self->route_key_id >= 0)
                return PyList_GET_ITEM(a->values, i);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->raw); i++) {
        PyObject *item = PyList_GET_ITEM(a->raw, i);
        if (PyUnicode_Compare(PyTuple_GET_ITEM(item, 0), self->route_key) == 0)
            return PyTuple_GET_ITEM(item, 1);
    }
    PyErr_Clear();
    return NULL;
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
    if (RUN->skip) {
        RUN->skip++;
        return 0;
    }
    Frame *parent = &RUN->frames[RUN->depth - 1];
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
    for (Py_ssize_t f = 0; RUN->descs && f < RUN->depth && !failed; f++) {
        Threads *list = &RUN->frames[f].lists[W_DESC];
        for (Py_ssize_t i = 0; i < list->len && !failed; i++)
            if (takes(self, list->at[i].state, name))
                failed = push_next(self, list->at[i].state, list->at[i].binding) < 0;
    }
    /* the predicates the open tag's attributes decide: failing threads die here */
    for (Py_ssize_t i = 0; i < found->len && !failed;) {
        PyObject *guard = PyList_GET_ITEM(self->guards, found->at[i].state);
        int passed = 1;
        if (guard != Py_None) {
            passed = passes(guard, attrs);
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
        if ((code & 0xFF) == WRITING && path == self->capture_path && self->capture_names != NULL) {
            int wanted = PySet_Contains(self->capture_names, tag); /* (a child the checks read) */
            if (wanted <= 0) {
                failed = wanted < 0;
                continue;
            }
        }
        if ((code & 0xFF) >= WRITING_INSIDE) { /* inside an element written out: this one too */
            PyObject *parts = parts_of(self, collect->at[i].binding, path);
            failed = write_open(self, parts, self->path_kind[path], tag, attrs, node) < 0 ||
                     threads_push(passed, path << 8 | WRITING_INSIDE, collect->at[i].binding) < 0;
            continue;
        }
        if (step < 0 || self->path_ids[self->path_at[path] + step] != name || name < 0)
            continue;
        PyObject *spec = PyTuple_GET_ITEM(self->paths, path);
        long end = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
        if (self->path_at[path] + step + 1 < self->path_at[path + 1]) { /* steps go on */
            failed = threads_push(passed, code + 1, collect->at[i].binding) < 0;
        } else if (end == P_XML || end == P_STRING) { /* the element: written out */
            failed = start_writing(self, passed, collect->at[i].binding, path, tag, attrs, node) < 0;
        } else if (end == P_TEXT) { /* its text children */
            failed = threads_push(passed, path << 8, collect->at[i].binding) < 0;
        } else { /* its attribute */
            PyObject *raw = attrs_raw(attrs), *values = PyTuple_GET_ITEM(
                collect->at[i].binding, HEAD + PyTuple_GET_SIZE(self->attributes) + path);
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
    if (found->len == 0 && RUN->descs == 0 && RUN->dtexts == 0 && passed->len == 0) {
        RUN->skip = 1; /* nothing can happen below: skip the subtree */
        return 0;
    }
    if (push_frame(self, node, tag) < 0) {
        threads_clear(found);
        threads_clear(passed);
        return -1;
    }
    Frame *frame = &RUN->frames[RUN->depth - 1];
    if ((self->up != NULL || self->made) && (frame->raw = Py_XNewRef(attrs_raw(attrs))) == NULL) {
        threads_clear(found);
        threads_clear(passed);
        return -1;
    }
    Threads swap = frame->collect; /* (empty: the collectors passed are its own now) */
    frame->collect = *passed, *passed = swap;
    if (found->len == 0)
        return 0;
    Py_ssize_t here = RUN->depth - 1;
    return closure(self, here, here, here - 1, attrs);
}

/* A text: the value of the paths whose text children are read here. */
/* A record of a text or attribute node (the end of a match of a text() or attribute step):
 * its node and document, its value as the nodes' output (a node selection's path; the
 * others empty); its depth 0: no frame's, nothing waits for it. */
static PyObject *leaf_record(Vm *self, long long node, PyObject *value)
{
    Py_ssize_t nattr = PyTuple_GET_SIZE(self->attributes), at = HEAD + nattr;
    Py_ssize_t size = at + self->npaths + (self->numbers ? nattr : 0) + self->made, out_path = -1;
    PyObject *term = PyTuple_GET_SIZE(self->terms) >= 1 ? PyTuple_GET_ITEM(self->terms, 0) : NULL;
    if (term != NULL && PyLong_AsLong(PyTuple_GET_ITEM(term, 0)) == T_PATH &&
        PyLong_AsSsize_t(PyTuple_GET_ITEM(term, 1)) == self->end_slot) /* (a node selection's) */
        out_path = PyLong_AsSsize_t(PyTuple_GET_ITEM(term, 2));
    PyObject *record = PyTuple_New(size);
    if (record == NULL)
        return NULL;
    PyTuple_SET_ITEM(record, 0, PyLong_FromLongLong(node));
    PyTuple_SET_ITEM(record, 1, PyLong_FromLong(0)); /* (no frame's: nothing waits for it) */
    PyTuple_SET_ITEM(record, 2, Py_NewRef(Py_None));
    PyTuple_SET_ITEM(record, 3, PyLong_FromLongLong(self->doc));
    for (Py_ssize_t k = HEAD; k < size; k++) {
        PyObject *item = k >= at && k < at + self->npaths
                             ? PyList_New(k >= at && k - at == out_path ? 1 : 0)
                             : Py_NewRef(Py_None);
        if (item == NULL)
            return Py_DECREF(record), NULL;
        if (k >= at && k - at == out_path)
            PyList_SET_ITEM(item, 0, Py_NewRef(value));
        PyTuple_SET_ITEM(record, k, item);
    }
    return PyErr_Occurred() ? (Py_DECREF(record), NULL) : record;
}

static int text(Vm *self, PyObject *value, long long node)
{
    Py_ssize_t top = RUN->depth - 1;
    if (RUN->frames[top].lists[W_TEXT].len || RUN->dtexts) { /* text() steps: this one */
        Threads *lists[2] = {&RUN->frames[top].lists[W_TEXT], NULL};
        for (Py_ssize_t f = top; f >= (RUN->dtexts ? 0 : top); f--) { /* (below: only with dtexts) */
            lists[1] = RUN->dtexts ? &RUN->frames[f].lists[W_DTEXT] : NULL;
            for (int g = f == top ? 0 : 1; g < 2; g++)
                for (Py_ssize_t i = 0; lists[g] != NULL && i < lists[g]->len; i++)
                    if (push_next(self, lists[g]->at[i].state, lists[g]->at[i].binding) < 0)
                        return -1;
        }
        if (self->stack.len) {
            Attrs none = {0};
            self->text_value = value, self->text_node = node;
            self->text_record = self->end_slot >= 0 ? leaf_record(self, node, value) : NULL;
            int failed = (self->end_slot >= 0 && self->text_record == NULL) || closure(self, top, -1, -1, &none) < 0;
            self->text_value = NULL;
            Py_CLEAR(self->text_record);
            if (failed)
                return -1;
        }
    }
    Threads *collect = &RUN->frames[top].collect;
    for (Py_ssize_t i = 0; i < collect->len; i++) {
        int32_t code = collect->at[i].state;
        if ((code & 0xFF) >= WRITING_INSIDE) { /* in an element written out */
            PyObject *parts = parts_of(self, collect->at[i].binding, code >> 8);
            if (write_text(self, parts, self->path_kind[code >> 8], value, node) < 0)
                return -1;
        } else if ((code & 0xFF) == 0) {
            Py_ssize_t at = HEAD + PyTuple_GET_SIZE(self->attributes) + (code >> 8);
            if (PyList_Append(PyTuple_GET_ITEM(collect->at[i].binding, at), value) < 0)
                return -1;
        }
    }
    return 0;
}

static int close_element(Vm *self)
{
    if (RUN->skip) { /* (rows go out at every close, as the Python automaton pumps them) */
        RUN->skip--;
        return pump(self);
    }
    if (RUN->depth <= 1)
        return 0; /* (a close with no open: the event source never gives one) */
    if (RUN->frames[RUN->depth - 1].collect.len && stop_writing(self) < 0)
        return -1;
    pop_frame(self);
    return pump(self);
}

/* An element of the stream opens: to the run it belongs to (partition by: the partitioned
 * element's partition, which the route finds, and the elements inside it). */
static int on_open(Vm *self, PyObject *tag, long long node, int32_t name, Attrs *attrs)
{
    if (!self->nroute)
        return open_element(self, tag, node, name, attrs);
    if (grow((void **)&self->masks, &self->masks_cap, self->rdepth + 2, sizeof *self->masks, 32) < 0)
        return -1;
    uint64_t up = self->masks[self->rdepth], mask = 0;
    for (Py_ssize_t p = 0; p < self->nroute; p++)
        if (up >> p & 1) {
            int32_t id = self->route_ids[p];
            if (self->route_desc[p]) /* a // step: below too */
                mask |= (uint64_t)1 << p;
            if (id == ANY_NAME || (id >= 0 && id == name))
                mask |= (uint64_t)1 << (p + 1);
        }
    self->masks[++self->rdepth] = mask;
    PyObject *key = mask >> self->nroute & 1 ? key_of(self, attrs) : NULL;
    if (key != NULL) { /* a partitioned element: the next child of its partition's root */
        Py_ssize_t run = partition_of(self, key);
        if (run < 0 || grow((void **)&self->routing, &self->routing_cap, self->nrouting + 2,
                            sizeof *self->routing, 16) < 0)
            return -1;
        self->cur = run;
        if ((RUN->depth > 1 || RUN->skip) && suspend(self) < 0)
            return -1;
        self->routing[self->nrouting++] = self->rdepth;
        self->routing[self->nrouting++] = run;
    }
    if (self->nrouting == 0)
        return 0;
    self->cur = self->routing[self->nrouting - 1];
    return open_element(self, tag, node, name, attrs);
}

static int on_text(Vm *self, PyObject *value, long long node)
{
    if (self->nroute) {
        if (self->nrouting == 0)
            return 0;
        self->cur = self->routing[self->nrouting - 1];
    }
    return RUN->skip ? 0 : text(self, value, node);
}

static int on_close(Vm *self)
{
    if (!self->nroute) {
        if (close_element(self) < 0)
            return -1;
        if (self->own != NULL)
            set_floor(self, self->cur);
        return 0;
    }
    if (self->rdepth == 0)
        return 0;
    int failed = 0;
    if (self->nrouting) {
        self->cur = self->routing[self->nrouting - 1];
        failed = close_element(self) < 0;
        if (!failed && self->routing[self->nrouting - 2] == self->rdepth) { /* it closes */
            self->nrouting -= 2;
            failed = RUN->ncuts && resume(self) < 0;
        }
        if (!failed && self->own != NULL)
            set_floor(self, self->cur);
    }
    self->rdepth--;
    return failed ? -1 : 0;
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
    for (Py_ssize_t p = 0; self->nroute && p < self->nroute + 1; p++) { /* the route's names, its key's */
        PyObject *want = p < self->nroute ? PyTuple_GET_ITEM(self->route_names, p) : self->route_key;
        int32_t *id = p < self->nroute ? &self->route_ids[p] : &self->route_key_id;
        if (want == Py_None) {
            *id = ANY_NAME;
            continue;
        }
        if (*id != UNKNOWN && self->known >= 0)
            continue;
        *id = UNKNOWN;
        for (Py_ssize_t i = count - 1; i >= 0; i--)
            if (PyUnicode_Compare(PyList_GET_ITEM(symbols, i), want) == 0) {
                *id = (int32_t)i;
                break;
            }
        if (PyErr_Occurred())
            return -1;
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
    int failed = on_open(self, tag, self->pending_node, name_id(self, tag), &attrs);
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
            int failed = on_open(self, tag, node[i], name[i], &attrs);
            Py_XDECREF(attrs.raw);
            if (failed < 0)
                goto done;
            i = j;
        } else {
            if (k == CLOSE && on_close(self) < 0)
                goto done;
            if (k == TEXT && on_text(self, PyList_GET_ITEM(values, i), node[i]) < 0)
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
    if (final && self->in_doc && self->nroute) {
        if (close_routed(self) < 0) /* (the partitions' rows go out) */
            return NULL;
        self->in_doc = 0;
        if (pump(self) < 0)
            return NULL;
    } else if (final && self->in_doc) {
        if (RUN->depth > 1) { /* the last document never ended */
            clear_queue(self);
            if (broke(self) < 0)
                return NULL;
        }
        while (RUN->depth)
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

/* frames as a list of (node, tag, record, threads by mode..., paths read, serial) */
static PyObject *frames_list(const Frame *frames, Py_ssize_t count)
{
    PyObject *out = PyList_New(count);
    for (Py_ssize_t d = 0; out != NULL && d < count; d++) {
        const Frame *f = &frames[d];
        PyObject *a = threads_list(&f->lists[0]), *b = threads_list(&f->lists[1]),
                 *c = threads_list(&f->lists[2]), *e = threads_list(&f->collect),
                 *t = threads_list(&f->lists[W_TEXT]), *u = threads_list(&f->lists[W_DTEXT]);
        PyObject *item = a && b && c && e && t && u
                             ? Py_BuildValue("(LOONNNNLONN)", f->node, f->tag ? f->tag : Py_None,
                                             f->record ? f->record : Py_None, a, b, c, e, f->serial,
                                             f->raw ? f->raw : Py_None, t, u)
                             : NULL;
        if (item == NULL) {
            Py_XDECREF(a), Py_XDECREF(b), Py_XDECREF(c), Py_XDECREF(e), Py_XDECREF(t), Py_XDECREF(u);
            Py_CLEAR(out);
        } else {
            PyList_SET_ITEM(out, d, item);
        }
    }
    return out;
}

/* A list of n Py_ssize_t (or uint64 masks: `masks`), as ints. */
static PyObject *numbers_list(const void *at, Py_ssize_t n, int masks)
{
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *v = masks ? PyLong_FromUnsignedLongLong(((const uint64_t *)at)[i])
                            : PyLong_FromSsize_t(((const Py_ssize_t *)at)[i]);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* state() -> the run's state as plain objects (what restore takes). */
static PyObject *vm_state(Vm *self, PyObject *unused)
{
    PyObject *runs = PyList_New(self->nctx), *queue = PyList_New(0);
    for (Py_ssize_t r = 0; runs != NULL && r < self->nctx; r++) {
        Context *c = &self->ctxs[r];
        PyObject *frames = frames_list(c->frames, c->depth), *saved = frames_list(c->saved, c->nsaved);
        PyObject *cuts = numbers_list(c->cuts, c->ncuts, 0);
        PyObject *item = frames && saved && cuts ? Py_BuildValue("(OnNNNN)", c->key ? c->key : Py_None,
                                                                 c->skip, frames, saved, cuts, floor_of(c))
                                                 : NULL;
        if (item == NULL) {
            Py_XDECREF(frames), Py_XDECREF(saved), Py_XDECREF(cuts);
            Py_CLEAR(runs);
        } else {
            PyList_SET_ITEM(runs, r, item);
        }
    }
    for (Py_ssize_t i = self->qhead; queue != NULL && i < self->qlen; i++) {
        Entry *e = &self->queue[i];
        PyObject *item = Py_BuildValue("(nnLOOLL)", e->wait, e->run, e->serial, e->row, e->alts ? e->alts : Py_None,
                                       e->edoc, e->enode);
        if (item == NULL || PyList_Append(queue, item) < 0)
            Py_CLEAR(queue);
        Py_XDECREF(item);
    }
    PyObject *pending = self->pending_tag
                            ? Py_BuildValue("(OLO)", self->pending_tag, self->pending_node, self->pending_raw)
                            : Py_NewRef(Py_None);
    PyObject *masks = numbers_list(self->masks, self->nroute ? self->rdepth + 1 : 0, 1);
    PyObject *routing = numbers_list(self->routing, self->nrouting, 0);
    PyObject *result = NULL;
    if (runs && queue && pending && masks && routing)
        result = Py_BuildValue("(LiOOOOOOL)", self->doc, self->in_doc, runs, queue, pending, self->out,
                               masks, routing, self->serials);
    Py_XDECREF(runs);
    Py_XDECREF(queue);
    Py_XDECREF(pending);
    Py_XDECREF(masks);
    Py_XDECREF(routing);
    return result;
}

/* Threads saved by state(): each (state, binding) with a state below limit and a binding
 * of size items (a record's: HEAD + the attributes + the paths). */
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

/* A frame saved by frames_list into f (zeroed). */
static int load_frame(Vm *self, Frame *f, PyObject *saved)
{
    long long node, serial;
    PyObject *tag, *record, *a, *b, *c, *e, *raw, *t, *u;
    if (!PyArg_ParseTuple(saved, "LOOOOOOLOOO", &node, &tag, &record, &a, &b, &c, &e, &serial, &raw, &t, &u))
        return -1;
    if (raw != Py_None && !PyList_Check(raw))
        return PyErr_SetString(PyExc_TypeError, "restore: a frame's attributes as a list"), -1;
    f->node = node, f->serial = serial;
    f->raw = raw == Py_None ? NULL : Py_NewRef(raw);
    f->tag = tag == Py_None ? NULL : Py_NewRef(tag);
    f->record = record == Py_None ? NULL : Py_NewRef(record);
    long states = (long)self->nstates, codes = (long)self->npaths << 8;
    Py_ssize_t slots = PyTuple_GET_SIZE(self->empty);
    Py_ssize_t fields = HEAD + PyTuple_GET_SIZE(self->attributes) * (self->numbers ? 2 : 1) + self->npaths + self->made;
    if (load_threads(&f->lists[0], a, states, slots) < 0 || load_threads(&f->lists[1], b, states, slots) < 0 ||
        load_threads(&f->lists[2], c, states, slots) < 0 || load_threads(&f->collect, e, codes, fields) < 0 ||
        load_threads(&f->lists[W_TEXT], t, states, slots) < 0 || load_threads(&f->lists[W_DTEXT], u, states, slots) < 0)
        return -1;
    return 0;
}

/* Empty every run (their frames and buffers freed) and the queue. */
static void clear_runs(Vm *self)
{
    for (Py_ssize_t r = 0; r < self->nctx; r++) {
        Context *c = &self->ctxs[r];
        for (Py_ssize_t d = 0; d < c->cap; d++)
            frame_free(&c->frames[d]);
        for (Py_ssize_t d = 0; d < c->nsaved; d++)
            frame_free(&c->saved[d]);
        PyMem_Free(c->frames);
        PyMem_Free(c->saved);
        PyMem_Free(c->cuts);
        Py_CLEAR(c->key);
        memset(c, 0, sizeof *c);
    }
    self->nctx = 0, self->cur = 0, self->nrouting = 0, self->rdepth = 0;
    clear_queue(self);
    if (self->keys != NULL)
        PyDict_Clear(self->keys);
}

/* restore(state): go on from a saved state (of a run of the same plan). */
static PyObject *vm_restore(Vm *self, PyObject *args)
{
    long long doc, serials;
    int in_doc;
    PyObject *runs, *queue, *pending, *out, *masks, *routing;
    if (!PyArg_ParseTuple(args, "(LiO!O!OO!O!O!L):restore", &doc, &in_doc, &PyList_Type, &runs, &PyList_Type,
                          &queue, &pending, &PyList_Type, &out, &PyList_Type, &masks, &PyList_Type, &routing,
                          &serials))
        return NULL;
    Py_ssize_t nruns = PyList_GET_SIZE(runs);
    if ((self->nroute == 0 && nruns != 1) || (self->nroute && PyList_GET_SIZE(masks) < 1) ||
        PyList_GET_SIZE(routing) % 2) {
        PyErr_SetString(PyExc_ValueError, "restore: not a state of this plan");
        return NULL;
    }
    clear_runs(self);
    Py_CLEAR(self->pending_tag);
    Py_CLEAR(self->pending_raw);
    self->doc = doc, self->in_doc = in_doc, self->serials = serials;
    if (grow((void **)&self->ctxs, &self->ctx_cap, nruns, sizeof *self->ctxs, 8) < 0)
        goto fail;
    for (Py_ssize_t r = 0; r < nruns; r++) {
        PyObject *key, *frames, *saved, *cuts, *floor;
        Py_ssize_t skip;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(runs, r), "OnO!O!O!O", &key, &skip, &PyList_Type, &frames,
                              &PyList_Type, &saved, &PyList_Type, &cuts, &floor))
            goto fail;
        self->cur = r, self->nctx = r + 1;
        Context *c = RUN;
        c->key = key == Py_None ? NULL : Py_NewRef(key);
        if ((c->key == NULL) != (self->nroute == 0)) {
            PyErr_SetString(PyExc_ValueError, "restore: not a state of this plan");
            goto fail;
        }
        if (c->key != NULL) {
            PyObject *number = PyLong_FromSsize_t(r);
            int failed = number == NULL || PyDict_SetItem(self->keys, key, number) < 0;
            Py_XDECREF(number);
            if (failed)
                goto fail;
        }
        Py_ssize_t nframes = PyList_GET_SIZE(frames), nsaved = PyList_GET_SIZE(saved), ncuts = PyList_GET_SIZE(cuts);
        if (grow((void **)&c->frames, &c->cap, nframes, sizeof *c->frames, 4) < 0 ||
            grow((void **)&c->saved, &c->saved_cap, nsaved, sizeof *c->saved, 8) < 0 ||
            grow((void **)&c->cuts, &c->cuts_cap, ncuts, sizeof *c->cuts, 8) < 0)
            goto fail;
        for (Py_ssize_t d = 0; d < nframes; d++) {
            if (load_frame(self, &c->frames[d], PyList_GET_ITEM(frames, d)) < 0)
                goto fail;
            c->depth = d + 1;
            c->descs += c->frames[d].lists[W_DESC].len > 0;
            c->dtexts += c->frames[d].lists[W_DTEXT].len > 0;
        }
        for (Py_ssize_t d = 0; d < nsaved; d++) {
            if (load_frame(self, &c->saved[d], PyList_GET_ITEM(saved, d)) < 0)
                goto fail;
            c->nsaved = d + 1;
        }
        Py_ssize_t total = 0;
        for (Py_ssize_t i = 0; i < ncuts; i++) {
            c->cuts[i] = PyLong_AsSsize_t(PyList_GET_ITEM(cuts, i));
            total += i % 2 ? 0 : c->cuts[i];
        }
        c->ncuts = ncuts, c->skip = skip;
        if (floor != Py_None && !PyArg_ParseTuple(floor, "LL", &c->floor_doc, &c->floor_node))
            goto fail;
        c->floor_set = floor != Py_None;
        if (PyErr_Occurred() || ncuts % 2 || total != nsaved || skip < 0) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "restore: not a state of this plan");
            goto fail;
        }
    }
    self->cur = 0;
    if (self->nroute) {
        Py_ssize_t n = PyList_GET_SIZE(masks), k = PyList_GET_SIZE(routing);
        if (grow((void **)&self->masks, &self->masks_cap, n + 1, sizeof *self->masks, 32) < 0 ||
            grow((void **)&self->routing, &self->routing_cap, k, sizeof *self->routing, 16) < 0)
            goto fail;
        for (Py_ssize_t i = 0; i < n; i++)
            self->masks[i] = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(masks, i));
        self->rdepth = n - 1;
        for (Py_ssize_t i = 0; i < k; i++) {
            Py_ssize_t v = PyLong_AsSsize_t(PyList_GET_ITEM(routing, i));
            if (i % 2 ? v < 0 || v >= nruns : v < 1 || v > self->rdepth) {
                PyErr_SetString(PyExc_ValueError, "restore: not a state of this plan");
                goto fail;
            }
            self->routing[i] = v;
        }
        self->nrouting = k;
        if (PyErr_Occurred())
            goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(queue); i++) {
        Entry e;
        PyObject *row, *alts;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(queue, i), "nnLOOLL", &e.wait, &e.run, &e.serial, &row, &alts,
                              &e.edoc, &e.enode))
            goto fail;
        if (e.run < 0 || e.run >= nruns || (alts != Py_None && (!PyTuple_Check(alts) || self->deep == NULL))) {
            PyErr_SetString(PyExc_ValueError, "restore: not a state of this plan");
            goto fail;
        }
        e.row = Py_NewRef(row), e.alts = alts == Py_None ? NULL : Py_NewRef(alts);
        if (enqueue(self, e) < 0) {
            Py_DECREF(row);
            Py_XDECREF(e.alts);
            goto fail;
        }
    }
    if (pending != Py_None) {
        PyObject *tag, *raw;
        if (!PyArg_ParseTuple(pending, "OLO!", &tag, &self->pending_node, &PyList_Type, &raw))
            goto fail;
        self->pending_tag = Py_NewRef(tag), self->pending_raw = PyList_GetSlice(raw, 0, PyList_GET_SIZE(raw));
    }
    Py_XSETREF(self->out, PyList_GetSlice(out, 0, PyList_GET_SIZE(out)));
    Py_RETURN_NONE;
fail:
    clear_runs(self); /* (a run that cannot go on: it begins again) */
    if (self->nroute == 0) {
        self->nctx = 1;
        self->in_doc = 0;
    }
    return NULL;
}

/* partitions() -> the partitions' keys in the order they began (partition by). */
static PyObject *vm_partitions(Vm *self, PyObject *unused)
{
    PyObject *out = PyList_New(self->nctx);
    for (Py_ssize_t r = 0; out != NULL && r < self->nctx; r++)
        PyList_SET_ITEM(out, r, Py_NewRef(self->ctxs[r].key ? self->ctxs[r].key : Py_None));
    return out;
}

/* floors() -> per run its floor (see set_floor), or None. */
static PyObject *vm_floors(Vm *self, PyObject *unused)
{
    PyObject *out = PyList_New(self->nctx);
    for (Py_ssize_t r = 0; out != NULL && r < self->nctx; r++) {
        PyObject *floor = floor_of(&self->ctxs[r]);
        if (floor == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, r, floor);
    }
    return out;
}

/* ----- the type ----- */

static void vm_dealloc(Vm *self)
{
    clear_runs(self);
    PyMem_Free(self->ctxs);
    threads_free(&self->passed);
    threads_free(&self->stack);
    threads_free(&self->seen);
    clear_joins(self);
    threads_free(&self->joined);
    PyMem_Free(self->reached);
    Py_XDECREF(self->joins);
    void *blocks[] = {self->kind, self->mode, self->side, self->kleene, self->next_at, self->next,
                      self->slot, self->start, self->test_id, self->queue, self->matches,
                      self->path_at, self->path_ids, self->route_desc, self->route_ids, self->masks,
                      self->routing, self->seen_at, self->seen_hash, self->path_kind};
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
    Py_XDECREF(self->early);
    Py_XDECREF(self->deep);
    Py_XDECREF(self->captures);
    Py_XDECREF(self->self_tests);
    Py_XDECREF(self->own);
    Py_XDECREF(self->up);
    Py_XDECREF(self->up_check);
    Py_XDECREF(self->make_node);
    Py_XDECREF(self->xml_slots);
    Py_XDECREF(self->py_term);
    Py_XDECREF(self->capture_names);
    Py_XDECREF(self->value_checks);
    Py_XDECREF(self->decide_check);
    Py_XDECREF(self->escape);
    Py_XDECREF(self->quoteattr);
    Py_XDECREF(self->symbols);
    Py_XDECREF(self->out);
    Py_XDECREF(self->pending_tag);
    Py_XDECREF(self->pending_raw);
    Py_XDECREF(self->keys);
    Py_XDECREF(self->route_names);
    Py_XDECREF(self->route_key);
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
                               "accept", "checks", "width", "route", "numbers", "early", "end_slot",
                               "as_text", "escape", "quoteattr", "deep", "decide_check", "capture_path",
                               "captures", "self_tests", "own", "joins", "up", "up_check", "make_node",
                               "py_term", "capture_names", "value_checks",
                               "checks_on_events", "made", "xml_slots", NULL};
    PyObject *kinds, *modes, *sides, *kleene, *next_at, *next, *slots, *tests, *guards, *start,
        *attributes, *terms, *empty;
    int found = 0;
    PyObject *paths = NULL, *accept = Py_None, *checks = NULL, *route = Py_None;
    Py_ssize_t width = -1;
    int numbers = 0;
    PyObject *early = NULL, *escape = Py_None, *quoteattr = Py_None, *deep = NULL, *decide_check = Py_None;
    Py_ssize_t end_slot = -1, capture_path = -1;
    PyObject *captures = NULL, *self_tests = NULL, *own = Py_None, *joins = NULL;
    PyObject *up = NULL, *up_check = Py_None, *make_node = Py_None, *py_term = Py_None;
    PyObject *capture_names = Py_None, *value_checks = NULL;
    int checks_on_events = 1, made = 0;
    PyObject *xml_slots = Py_None;
    int as_text = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOO!O!OO!O!O!|pO!OO!nOpO!npOOO!OnSO!OO!O!OOOOO!ppO:Vm", keywords, &kinds, &modes,
                                     &sides, &kleene, &next_at, &next, &slots, &PyList_Type, &tests,
                                     &PyList_Type, &guards, &start, &PyTuple_Type, &attributes,
                                     &PyTuple_Type, &terms, &PyTuple_Type, &empty, &found, &PyTuple_Type,
                                     &paths, &accept, &PyList_Type, &checks, &width, &route, &numbers,
                                     &PyList_Type, &early, &end_slot, &as_text, &escape, &quoteattr,
                                     &PyList_Type, &deep, &decide_check, &capture_path, &captures,
                                     &PyList_Type, &self_tests, &own, &PyList_Type, &joins, &PyList_Type,
                                     &up, &up_check, &make_node, &py_term, &capture_names, &PyTuple_Type,
                                     &value_checks, &checks_on_events, &made, &xml_slots))
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
        int entry = self->kind[s] == S_ENTER || self->kind[s] == S_IENTER; /* (a group's slot) */
        Py_ssize_t limit = entry ? slot_count : width;
        PyObject *join = joins != NULL && PyList_GET_SIZE(joins) == n ? PyList_GET_ITEM(joins, s) : NULL;
        long group = -1, branch = -1, operands = 0;
        if (join != NULL && join != Py_None &&
            (!PyTuple_Check(join) || !PyArg_ParseTuple(join, "lll", &group, &branch, &operands)))
            PyErr_Clear();
        if ((self->kind[s] == S_JOIN && (group < 0 || width + group >= slot_count || branch < 0 ||
                                         branch >= operands || operands > 32)) ||
            (self->kind[s] == S_IENTER && self->slot[s] < width)) {
            PyErr_Format(PyExc_ValueError, "Vm: state %zd: an intersect's join (group, operand, operands) "
                                           "and context slot", s);
            goto fail;
        }
        if (self->kind[s] > S_ATTR || self->mode[s] > W_DTEXT || self->next_at[s] < 0 ||
            (self->kind[s] == S_ATTR && (end_slot < 0 || (PyList_GET_ITEM(tests, s) != Py_None &&
                                                          !PyUnicode_Check(PyList_GET_ITEM(tests, s))))) ||
            self->next_at[s] > self->next_at[s + 1] || self->slot[s] >= limit ||
            (entry && self->slot[s] >= 0 && self->slot[s] < width) ||
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
    if (self->paths == NULL || !(self->path_at = PyMem_Calloc((size_t)self->npaths + 1, 4)) ||
        !(self->path_kind = PyMem_Calloc((size_t)self->npaths + 1, 4)))
        goto fail;
    for (Py_ssize_t p = 0; p < self->npaths; p++) {
        PyObject *spec = PyTuple_GET_ITEM(self->paths, p), *names, *attribute;
        int kind;
        if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "O!iO", &PyTuple_Type, &names, &kind, &attribute) ||
            kind < P_TEXT || kind > P_STRING || PyTuple_GET_SIZE(names) > 250 ||
            (kind == P_XML && (!PyCallable_Check(escape) || !PyCallable_Check(quoteattr))) ||
            (kind == P_ATTR && (!PyUnicode_Check(attribute) || PyTuple_GET_SIZE(names) == 0))) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "Vm: paths: (names, 0 text() / 1 an attribute / 2 the element / "
                                              "3 its events, the attribute or None)");
            goto fail;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++)
            if (!PyUnicode_Check(PyTuple_GET_ITEM(names, k))) {
                PyErr_SetString(PyExc_ValueError, "Vm: paths: names as str");
                goto fail;
            }
        self->path_at[p + 1] = self->path_at[p] + (int32_t)PyTuple_GET_SIZE(names);
        self->path_kind[p] = kind;
    }
    if (!(self->path_ids = PyMem_Calloc((size_t)self->path_at[self->npaths] + 1, 4)))
        goto fail;
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(terms); t++) {
        PyObject *term = PyTuple_GET_ITEM(terms, t);
        long op, slot, index;
        if (!PyTuple_Check(term) || !PyArg_ParseTuple(term, "lll", &op, &slot, &index) || op < 0 ||
            op > T_PY || slot < 0 || slot >= width || (op == T_PY && !PyCallable_Check(py_term)) ||
            (op < T_TAG && (index < 0 || index >= PyTuple_GET_SIZE(attributes))) ||
            (op >= T_PATH && op <= T_PATH_LAST && (index < 0 || index >= self->npaths))) {
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
    self->numbers = numbers;
    self->as_text = as_text;
    self->end_slot = end_slot;
    self->escape = Py_NewRef(escape), self->quoteattr = Py_NewRef(quoteattr);
    self->decide_check = Py_NewRef(decide_check), self->capture_path = capture_path;
    if (deep != NULL) { /* predicates on subtrees: their checks, the capture, the binding's end */
        int good = PyList_GET_SIZE(deep) == n && PyCallable_Check(decide_check) && capture_path >= 0 &&
                   capture_path < self->npaths && self->path_kind[capture_path] == P_EVENTS &&
                   PyTuple_GET_SIZE(empty) > width && PyTuple_Check(PyTuple_GET_ITEM(empty, PyTuple_GET_SIZE(empty) - 1));
        for (Py_ssize_t k = 0; good && k < n; k++)
            good = PyList_GET_ITEM(deep, k) == Py_None || PyTuple_Check(PyList_GET_ITEM(deep, k));
        if (!good) {
            PyErr_SetString(PyExc_ValueError, "Vm: deep: per state its predicates or None, with decide_check, "
                                              "capture_path and a binding that ends with its checks");
            goto fail;
        }
        self->deep = Py_NewRef(deep);
        if (captures != NULL && PyBytes_GET_SIZE(captures) != PyTuple_GET_SIZE(empty) - 1) {
            PyErr_SetString(PyExc_ValueError, "Vm: captures: per binding item (but its checks) 0 or 1");
            goto fail;
        }
        self->captures = Py_XNewRef(captures);
    } else if (decide_check != Py_None) {
        PyErr_SetString(PyExc_ValueError, "Vm: decide_check without deep");
        goto fail;
    }
    if (end_slot >= width || end_slot < -1) {
        PyErr_SetString(PyExc_ValueError, "Vm: end_slot: a variable's slot or -1");
        goto fail;
    }
    if (early != NULL && PyList_GET_SIZE(early) != n) {
        PyErr_SetString(PyExc_ValueError, "Vm: early: per state its tests or None");
        goto fail;
    }
    for (Py_ssize_t k = 0; early != NULL && k < n; k++) {
        PyObject *tests = PyList_GET_ITEM(early, k);
        int good = tests == Py_None || PyTuple_Check(tests);
        for (Py_ssize_t i = 0; good && tests != Py_None && i < PyTuple_GET_SIZE(tests); i++) {
            PyObject *item = PyTuple_GET_ITEM(tests, i), *slots;
            good = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 &&
                   PyCallable_Check(PyTuple_GET_ITEM(item, 0)) && PyTuple_Check(slots = PyTuple_GET_ITEM(item, 1));
            for (Py_ssize_t j = 0; good && j < PyTuple_GET_SIZE(slots); j++) {
                Py_ssize_t slot = PyLong_AsSsize_t(PyTuple_GET_ITEM(slots, j));
                good = slot >= 0 && slot < width;
            }
        }
        if (!good) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "Vm: early: per state ((test, slots), ...) or None");
            goto fail;
        }
    }
    self->early = Py_XNewRef(early);
    for (Py_ssize_t k = 0; self_tests != NULL && k < PyList_GET_SIZE(self_tests); k++) {
        PyObject *test = PyList_GET_ITEM(self_tests, k);
        if (PyList_GET_SIZE(self_tests) != n ||
            (test != Py_None && !(PyTuple_Check(test) && PyTuple_GET_SIZE(test) == 2 &&
                                  (PyTuple_GET_ITEM(test, 0) == Py_None || PyUnicode_Check(PyTuple_GET_ITEM(test, 0))) &&
                                  PyBool_Check(PyTuple_GET_ITEM(test, 1))))) {
            PyErr_SetString(PyExc_ValueError, "Vm: self_tests: per state (name or None, bool) or None");
            goto fail;
        }
    }
    self->self_tests = Py_XNewRef(self_tests);
    if (own != Py_None && (!PyBytes_Check(own) || PyBytes_GET_SIZE(own) != width)) {
        PyErr_SetString(PyExc_ValueError, "Vm: own: per variable slot whether it is the query's own (bytes) or None");
        goto fail;
    }
    self->own = own == Py_None ? NULL : Py_NewRef(own);
    self->joins = Py_XNewRef(joins);
    if (up != NULL && (PyList_GET_SIZE(up) != n || !PyCallable_Check(up_check) || !PyCallable_Check(make_node))) {
        PyErr_SetString(PyExc_ValueError, "Vm: up: per state the numbers of its predicates that read above "
                                          "(or None), with up_check and make_node");
        goto fail;
    }
    self->up = Py_XNewRef(up);
    if (made && !PyCallable_Check(make_node)) {
        PyErr_SetString(PyExc_ValueError, "Vm: made: records with their nodes need make_node");
        goto fail;
    }
    self->made = made;
    if (xml_slots != Py_None && (!PyBytes_Check(xml_slots) || PyBytes_GET_SIZE(xml_slots) != PyTuple_GET_SIZE(empty))) {
        PyErr_SetString(PyExc_ValueError, "Vm: xml_slots: per slot of the empty binding whether it writes its nodes out");
        goto fail;
    }
    self->xml_slots = xml_slots == Py_None ? NULL : Py_NewRef(xml_slots);
    self->py_term = Py_NewRef(py_term);
    if (capture_names != Py_None && !PyFrozenSet_Check(capture_names)) {
        PyErr_SetString(PyExc_TypeError, "Vm: capture_names: a frozenset of names or None");
        goto fail;
    }
    self->capture_names = capture_names == Py_None ? NULL : Py_NewRef(capture_names);
    for (Py_ssize_t k = 0; value_checks != NULL && k < PyTuple_GET_SIZE(value_checks); k++) {
        PyObject *tree = PyTuple_GET_ITEM(value_checks, k);
        if (tree != Py_None && Py_TYPE(tree) != &ConditionsType) {
            PyErr_SetString(PyExc_TypeError, "Vm: value_checks: per pending predicate a Conditions or None");
            goto fail;
        }
    }
    self->value_checks = Py_XNewRef(value_checks);
    self->checks_on_events = checks_on_events;
    self->up_check = Py_NewRef(up_check), self->make_node = Py_NewRef(make_node);
    self->accept = Py_NewRef(accept);
    self->checks = Py_XNewRef(checks);
    self->known = -1;
    if ((self->out = PyList_New(0)) == NULL || (self->keys = PyDict_New()) == NULL)
        goto fail;
    if (route != Py_None) { /* partition by: ((// step?, name or None)..., key attribute) */
        PyObject *steps, *key;
        if (!PyArg_ParseTuple(route, "O!U", &PyTuple_Type, &steps, &key) || PyTuple_GET_SIZE(steps) < 1 ||
            PyTuple_GET_SIZE(steps) > 63) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "Vm: route: ((descendant, name or None), ...) of 1 to 63 steps, key");
            goto fail;
        }
        self->nroute = PyTuple_GET_SIZE(steps);
        self->route_key = Py_NewRef(key);
        self->route_names = PyTuple_New(self->nroute);
        self->route_desc = PyMem_Calloc((size_t)self->nroute, 1);
        self->route_ids = PyMem_Calloc((size_t)self->nroute, 4);
        if (self->route_names == NULL || self->route_desc == NULL || self->route_ids == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t p = 0; p < self->nroute; p++) {
            int desc;
            PyObject *name;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(steps, p), "pO", &desc, &name) ||
                (name != Py_None && !PyUnicode_Check(name))) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "Vm: route: a step is (descendant, name or None)");
                goto fail;
            }
            self->route_desc[p] = (uint8_t)desc;
            PyTuple_SET_ITEM(self->route_names, p, Py_NewRef(name));
        }
        if (grow((void **)&self->masks, &self->masks_cap, 1, sizeof *self->masks, 32) < 0)
            goto fail;
    } else if (grow((void **)&self->ctxs, &self->ctx_cap, 1, sizeof *self->ctxs, 8) < 0) {
        goto fail;
    } else {
        self->nctx = 1; /* the document's run */
    }
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
    {"partitions", (PyCFunction)vm_partitions, METH_NOARGS,
     "partitions() -> the keys of the partitions in the order they began (partition by)."},
    {"restore", (PyCFunction)vm_restore, METH_VARARGS, "restore(state): go on from a saved state."},
    {"floors", (PyCFunction)vm_floors, METH_NOARGS,
     "floors() -> per run, the earliest start a match may still have as (document, node), or None "
     "(a selection policy: as of the run's last close)."},
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
    if (PyType_Ready(&VmType) < 0 || PyType_Ready(&ConditionsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddObjectRef(m, "Vm", (PyObject *)&VmType) < 0 ||
                      PyModule_AddObjectRef(m, "Conditions", (PyObject *)&ConditionsType) < 0))
        Py_CLEAR(m);
    return m;
}

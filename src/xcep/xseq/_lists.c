/* The flat-sequence runtime's list reader, outside Python.
 *
 * ``read`` walks one batch's columns as ``xcep.xseq.sequence.ListReader.read`` does
 * for lists whose fields are all attributes: the opens down to the list's depth (their
 * closes too when an element is stepped at its close), the path's names checked
 * level by level, and for each list element its fields' values read from the
 * attributes after its open, each paired with its number (a cache of numbers, and on a
 * miss ``values.to_number``'s reading, in C for a str); it calls ``take(key, element)`` and ``mark(what)`` as the
 * Python reader does, which stays as the reference (the property tests run both).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "numbers.h"

enum { OPEN = 0, ATTR = 1, TEXT = 2, CLOSE = 3 };
enum { WILDCARD = -1 }; /* a path step for any name (a name the batch lacks: -2) */
#define NUMBERS_LIMIT 4096 /* numbers cached (then started afresh), as ListReader.pair */

typedef struct {
    PyObject *numbers, *to_number;
} Pairs;

/* values.to_number of a str: float(value) when finite and without '_' (Python's float
 * reads '1_000'), else None; a new reference, NULL on an error other than not a number */
static PyObject *string_number(PyObject *value)
{
    if (plainly_not_a_number(value))
        Py_RETURN_NONE;
    PyObject *number = PyFloat_FromString(value);
    if (number == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t underscore = PyUnicode_FindChar(value, '_', 0, PyUnicode_GET_LENGTH(value), 1);
    if (underscore == -2) {
        Py_DECREF(number);
        return NULL;
    }
    if (underscore >= 0 || !isfinite(PyFloat_AS_DOUBLE(number))) {
        Py_DECREF(number);
        Py_RETURN_NONE;
    }
    return number;
}

/* (value, number of value): the number from the cache, or to_number(value) */
static PyObject *pair(Pairs *p, PyObject *value)
{
    PyObject *number = PyDict_GetItemWithError(p->numbers, value);
    if (number != NULL) {
        Py_INCREF(number);
    } else {
        if (PyErr_Occurred())
            return NULL;
        if (PyDict_GET_SIZE(p->numbers) > NUMBERS_LIMIT)
            PyDict_Clear(p->numbers);
        number = PyUnicode_CheckExact(value) ? string_number(value)
                                              : PyObject_CallOneArg(p->to_number, value);
        if (number == NULL || PyDict_SetItem(p->numbers, value, number) < 0) {
            Py_XDECREF(number);
            return NULL;
        }
    }
    PyObject *out = PyTuple_Pack(2, value, number);
    Py_DECREF(number);
    return out;
}

static int call(PyObject *function, PyObject *a, PyObject *b)
{
    PyObject *r = b != NULL ? PyObject_CallFunctionObjArgs(function, a, b, NULL)
                            : PyObject_CallOneArg(function, a);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The element of the open at i: [doc, node, name, fields, raw attributes or None, None,
 * []], and its partition key (a new reference, or NULL with no error: none). */
static PyObject *element_at(Py_ssize_t i, Py_ssize_t n, const unsigned char *kind,
                            const int32_t *name, const int64_t *node, PyObject *values,
                            PyObject *table, PyObject *doc, long key_id, PyObject *wanted,
                            Py_ssize_t width, int keep_raw, Pairs *p, PyObject **key)
{
    PyObject *fields = PyList_New(width), *raw = keep_raw ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *element = NULL;
    *key = NULL;
    if (fields == NULL || raw == NULL)
        goto out;
    for (Py_ssize_t k = 0; k < width; k++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(fields, k, Py_None);
    }
    for (Py_ssize_t j = i + 1; j < n && kind[j] == ATTR; j++) {
        PyObject *value = PyList_GET_ITEM(values, j);
        if (name[j] == key_id && *key == NULL) {
            Py_INCREF(value);
            *key = value;
        }
        PyObject *id = PyLong_FromLong(name[j]);
        if (id == NULL)
            goto out;
        PyObject *at = PyDict_GetItemWithError(wanted, id);
        Py_DECREF(id);
        if (at == NULL && PyErr_Occurred())
            goto out;
        if (at != NULL) {
            Py_ssize_t slot = PyLong_AsSsize_t(at);
            if (slot < 0 || slot >= width) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "read: a field's slot out of range");
                goto out;
            }
            PyObject *found = pair(p, value);
            if (found == NULL)
                goto out;
            PyList_SetItem(fields, slot, found); /* steals; drops the None */
        }
        if (keep_raw) {
            if (name[j] < 0 || name[j] >= PyList_GET_SIZE(table)) {
                PyErr_SetString(PyExc_ValueError, "read: a name id outside the table");
                goto out;
            }
            PyObject *ident = PyLong_FromLongLong(node[j]);
            PyObject *item =
                ident ? PyTuple_Pack(3, PyList_GET_ITEM(table, name[j]), value, ident) : NULL;
            Py_XDECREF(ident);
            if (item == NULL || PyList_Append(raw, item) < 0) {
                Py_XDECREF(item);
                goto out;
            }
            Py_DECREF(item);
        }
    }
    if (name[i] < 0 || name[i] >= PyList_GET_SIZE(table)) {
        PyErr_SetString(PyExc_ValueError, "read: a name id outside the table");
        goto out;
    }
    PyObject *children = PyList_New(0);
    PyObject *ident = PyLong_FromLongLong(node[i]);
    if (children != NULL && ident != NULL)
        element = PyList_New(7);
    if (element != NULL) {
        PyObject *tag = PyList_GET_ITEM(table, name[i]);
        Py_INCREF(doc);
        Py_INCREF(tag);
        Py_INCREF(fields);
        Py_INCREF(raw);
        Py_INCREF(Py_None);
        PyList_SET_ITEM(element, 0, doc);
        PyList_SET_ITEM(element, 1, ident);
        PyList_SET_ITEM(element, 2, tag);
        PyList_SET_ITEM(element, 3, fields);
        PyList_SET_ITEM(element, 4, raw);
        PyList_SET_ITEM(element, 5, Py_None);
        PyList_SET_ITEM(element, 6, children);
        ident = children = NULL; /* stolen */
    }
    Py_XDECREF(children);
    Py_XDECREF(ident);
out:
    Py_XDECREF(fields);
    Py_XDECREF(raw);
    if (element == NULL)
        Py_CLEAR(*key);
    return element;
}

static PyObject *read_list(PyObject *module, PyObject *args)
{
    Py_buffer kinds, depths, names, docs, nodes;
    PyObject *values, *table, *path, *wanted, *ok, *pending, *pending_key, *doc_now, *take,
        *mark, *opens_marker, *ends_marker;
    long key_id;
    Py_ssize_t width;
    int keep_raw, at_close, partitioned;
    Pairs p;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*O!O!O!lO!npppO!OOOOOOOO!O:read", &kinds, &depths,
                          &names, &docs, &nodes, &PyList_Type, &values, &PyList_Type, &table,
                          &PyTuple_Type, &path, &key_id, &PyDict_Type, &wanted, &width,
                          &keep_raw, &at_close, &partitioned, &PyList_Type, &ok, &pending,
                          &pending_key, &doc_now, &take, &mark, &opens_marker, &ends_marker,
                          &PyDict_Type, &p.numbers, &p.to_number))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = kinds.len, depth_of_list = PyTuple_GET_SIZE(path);
    if (depths.len != 4 * n || names.len != 4 * n || docs.len != 8 * n || nodes.len != 8 * n ||
        PyList_GET_SIZE(values) != n || PyList_GET_SIZE(ok) != depth_of_list + 1 ||
        depth_of_list < 1 || width < 0) {
        PyErr_SetString(PyExc_ValueError, "read: the columns of one batch, ok per depth");
        goto done;
    }
    long *want = PyMem_Malloc(depth_of_list * sizeof *want);
    if (want == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t d = 0; d < depth_of_list; d++) {
        want[d] = PyLong_AsLong(PyTuple_GET_ITEM(path, d));
        if (want[d] == -1 && PyErr_Occurred())
            goto free_want;
    }
    const unsigned char *kind = kinds.buf;
    const int32_t *depth_at = depths.buf, *name = names.buf;
    const int64_t *doc_at = docs.buf, *node = nodes.buf;
    Py_INCREF(pending);
    Py_INCREF(pending_key);
    Py_INCREF(doc_now);
    int has_doc = doc_now != Py_None;
    long long doc = has_doc ? PyLong_AsLongLong(doc_now) : 0;
    if (has_doc && doc == -1 && PyErr_Occurred())
        goto cursor;
    for (Py_ssize_t i = 0; i < n; i++) {
        int k = kind[i];
        Py_ssize_t depth = depth_at[i];
        if (depth > depth_of_list || !(k == OPEN || (at_close && k == CLOSE)))
            continue;
        if (!has_doc || doc_at[i] != doc) { /* a new document (the last may have been cut) */
            if (!partitioned && call(mark, ends_marker, NULL) < 0)
                goto cursor;
            PyObject *number = PyLong_FromLongLong(doc_at[i]);
            if (number == NULL)
                goto cursor;
            Py_SETREF(doc_now, number);
            doc = doc_at[i];
            has_doc = 1;
            Py_SETREF(pending, Py_NewRef(Py_None));
        }
        if (k == CLOSE) {
            if (depth == depth_of_list) {
                if (pending != Py_None) {
                    PyObject *element = pending, *key = pending_key;
                    pending = Py_NewRef(Py_None);
                    pending_key = Py_NewRef(Py_None);
                    int r = call(take, key, element);
                    Py_DECREF(element);
                    Py_DECREF(key);
                    if (r < 0)
                        goto cursor;
                }
            } else if (depth == depth_of_list - 1 && !partitioned) {
                if (call(mark, ends_marker, NULL) < 0) /* the parent's list is over */
                    goto cursor;
            }
            continue;
        }
        if (depth < 1) {
            PyErr_SetString(PyExc_ValueError, "read: an open at depth 0");
            goto cursor;
        }
        long step = want[depth - 1];
        int on = PyList_GET_ITEM(ok, depth - 1) == Py_True && (step == WILDCARD || step == name[i]);
        PyList_SetItem(ok, depth, Py_NewRef(on ? Py_True : Py_False));
        if (depth < depth_of_list) {
            if (depth == depth_of_list - 1 && !partitioned && on &&
                call(mark, opens_marker, NULL) < 0)
                goto cursor;
            continue;
        }
        if (!on)
            continue;
        PyObject *key;
        PyObject *element = element_at(i, n, kind, name, node, values, table, doc_now, key_id,
                                       wanted, width, keep_raw, &p, &key);
        if (element == NULL)
            goto cursor;
        if (partitioned && key == NULL) { /* in no partition */
            Py_DECREF(element);
            continue;
        }
        if (key == NULL)
            key = Py_NewRef(Py_None);
        if (at_close) { /* stepped at its close, as the automaton emits then */
            Py_SETREF(pending, element);
            Py_SETREF(pending_key, key);
            continue;
        }
        int r = call(take, key, element);
        Py_DECREF(element);
        Py_DECREF(key);
        if (r < 0)
            goto cursor;
    }
    result = PyTuple_Pack(3, pending, pending_key, doc_now);
cursor:
    Py_DECREF(pending);
    Py_DECREF(pending_key);
    Py_DECREF(doc_now);
free_want:
    PyMem_Free(want);
done:
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&depths);
    PyBuffer_Release(&names);
    PyBuffer_Release(&docs);
    PyBuffer_Release(&nodes);
    return result;
}

/* ------------------------------------------------------------------------------------
 * The step function, outside Python.
 *
 * A ``Stepper`` does what the Python step function ``_StepSource`` generates for a pattern
 * does (which stays as its reference: the property tests run both): ``step(list, e)``
 * moves each partial match ``(item, registers)`` of ``list.threads`` by the element ``e``
 * through the blocks of its item, in order, then starts a new one; the new partial
 * matches replace ``list.threads``, ``e`` becomes ``list.pred``, and the matches found
 * are counted in ``list.counts`` or handed to ``emit(list, found)``. The partial matches
 * are the Python tuples the generated function makes, so that everything else (saving a
 * run, selection policies, rows) reads them alike.
 *
 * Conditions are trees of nodes (``_StepProgram`` in sequence.py): constants, an
 * element's field (of ``e``, of ``p`` the list's previous element, or of a variable's
 * element: the one bound, a Kleene-* run's first or last), arithmetic on the first value of
 * each side, comparisons (numbers when both values have one, else strings; existential
 * over a child's texts), and, or, not, and a Python closure ``fn(regs, e, p)`` for the
 * rest. A condition that reads no partial match is decided once per element.
 */

enum { N_CONST, N_FIELD, N_ARITH, N_CMP, N_AND, N_OR, N_NOT, N_CALL };
enum { S_E, S_P, S_SLOT, S_FIRST, S_LAST };
enum { A_ADD, A_SUB, A_MUL, A_DIV };
enum { V_EMPTY, V_PAIR, V_MANY, V_NUM };

typedef struct {
    int kind, op, src, slot, at, many, left, right;
    PyObject *obj; /* a constant's pair, a closure */
} Node;

typedef struct {
    int kind;
    PyObject *obj; /* a pair, or a list of pairs (borrowed unless owned) */
    double num;
    PyObject *owned;
} Val;

typedef struct {
    int j, k, slot, star, final;
    PyObject *name, *k_obj;
    int *pre, npre, *conds, nconds, *rest, nrest;
} Block;

typedef struct {
    PyObject_HEAD
    Node *nodes;
    Py_ssize_t nnodes;
    int *roots; /* per condition, its node */
    signed char *element_only, *cache;
    Py_ssize_t nconds;
    Block *blocks;
    Py_ssize_t nblocks;
    Py_ssize_t *first_block; /* per item j + 1: its blocks' range (first_block[j+1] ..) */
    Py_ssize_t nitems;
    Py_ssize_t width;
    int keep_nodes;
    int *count_slots, *count_whole, ncounts, count_in_place;
    PyObject *empty, *emit, *dedupe, *arithmetic_pair, *as_string;
    PyObject *s_threads, *s_pred, *s_counts, *one;
    int *ints; /* the program's integers, one allocation */
    vectorcallfunc vectorcall;
} Stepper;

typedef struct {
    PyObject *e, *p, *regs;
} Ctx;

static void release(Val *v)
{
    Py_CLEAR(v->owned);
}

/* the element's field ``at``: a pair, None, or (a child's texts) a list of pairs */
static int field_of(PyObject *element, int at, int many, Val *out)
{
    out->kind = V_EMPTY;
    if (element == Py_None)
        return 0;
    if (!PyList_Check(element) || PyList_GET_SIZE(element) < 4) {
        PyErr_SetString(PyExc_TypeError, "step: an element is not a list");
        return -1;
    }
    PyObject *fields = PyList_GET_ITEM(element, 3);
    if (!PyList_Check(fields) || at >= PyList_GET_SIZE(fields)) {
        PyErr_SetString(PyExc_TypeError, "step: an element's fields are not a list of its width");
        return -1;
    }
    PyObject *v = PyList_GET_ITEM(fields, at);
    if (v == Py_None)
        return 0;
    if (many) {
        if (!PyList_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "step: a child's texts are not a list");
            return -1;
        }
        out->kind = V_MANY;
    } else {
        if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
            PyErr_SetString(PyExc_TypeError, "step: a field's value is not a pair");
            return -1;
        }
        out->kind = V_PAIR;
    }
    out->obj = v;
    return 0;
}

/* a pair's number: 1 and *x when it has one, 0 when not */
static int number_of(PyObject *pair, double *x)
{
    PyObject *n = PyTuple_GET_ITEM(pair, 1);
    if (n == Py_None)
        return 0;
    *x = PyFloat_Check(n) ? PyFloat_AS_DOUBLE(n) : PyFloat_AsDouble(n);
    return 1;
}

static int eval_value(Stepper *s, int at, Ctx *c, Val *out);
static int eval_cond(Stepper *s, int at, Ctx *c);

/* whether a Kleene-* variable's register is (first, last, count, chain) */
static int is_run(PyObject *q)
{
    if (PyTuple_Check(q) && PyTuple_GET_SIZE(q) == 4)
        return 1;
    PyErr_SetString(PyExc_TypeError, "step: a Kleene-* register is not (first, last, count, chain)");
    return 0;
}

/* the first value of an operand (arithmetic reads no other): 1 and *x when it has a
 * number, 0 when it has none (or no value), -1 on an error */
static int first_number(Val *v, double *x)
{
    switch (v->kind) {
    case V_NUM:
        *x = v->num;
        return 1;
    case V_PAIR:
        return number_of(v->obj, x);
    case V_MANY:
        if (PyList_GET_SIZE(v->obj) == 0)
            return 0;
        PyObject *pair = PyList_GET_ITEM(v->obj, 0);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "step: a child's text is not a pair");
            return -1;
        }
        return number_of(pair, x);
    }
    return 0;
}

static int eval_value(Stepper *s, int at, Ctx *c, Val *out)
{
    Node *n = &s->nodes[at];
    out->owned = NULL;
    out->kind = V_EMPTY;
    switch (n->kind) {
    case N_CONST:
        out->kind = V_PAIR;
        out->obj = n->obj;
        return 0;
    case N_FIELD: {
        PyObject *element;
        if (n->src == S_E) {
            element = c->e;
        } else if (n->src == S_P) {
            element = c->p;
        } else {
            PyObject *r = PyTuple_GET_ITEM(c->regs, n->slot);
            if (r == Py_None)
                return 0;
            if (n->src != S_SLOT && !is_run(r))
                return -1;
            element = n->src == S_SLOT ? r : PyTuple_GET_ITEM(r, n->src == S_FIRST ? 0 : 1);
        }
        return field_of(element, n->at, n->many, out);
    }
    case N_ARITH: {
        Val a, b;
        double x = 0, y = 0;
        if (eval_value(s, n->left, c, &a) < 0)
            return -1;
        int hx = first_number(&a, &x);
        release(&a);
        if (hx <= 0)
            return hx;
        if (eval_value(s, n->right, c, &b) < 0)
            return -1;
        int hy = first_number(&b, &y);
        release(&b);
        if (hy <= 0)
            return hy;
        double r;
        switch (n->op) {
        case A_ADD: r = x + y; break;
        case A_SUB: r = x - y; break;
        case A_MUL: r = x * y; break;
        default:
            if (y == 0)
                return 0; /* no value, as values.arith */
            r = x / y;
        }
        if (isfinite(r)) {
            out->kind = V_NUM;
            out->num = r;
            return 0;
        }
        PyObject *number = PyFloat_FromDouble(r); /* (its string, None), as _arithmetic */
        PyObject *pair = number ? PyObject_CallOneArg(s->arithmetic_pair, number) : NULL;
        Py_XDECREF(number);
        if (pair == NULL)
            return -1;
        out->kind = V_PAIR;
        out->obj = out->owned = pair;
        return 0;
    }
    default: { /* a condition used as a value: never made by _StepProgram */
        PyErr_SetString(PyExc_ValueError, "step: a node that has no value");
        return -1;
    }
    }
}

/* one value's string for a comparison of strings (a new reference) */
static PyObject *string_of(Stepper *s, PyObject *pair, double num)
{
    if (pair != NULL && PyTuple_GET_ITEM(pair, 0) != Py_None)
        return Py_NewRef(PyTuple_GET_ITEM(pair, 0));
    PyObject *number = pair != NULL ? Py_NewRef(PyTuple_GET_ITEM(pair, 1)) : PyFloat_FromDouble(num);
    if (number == NULL)
        return NULL;
    PyObject *text = PyObject_CallOneArg(s->as_string, number);
    Py_DECREF(number);
    return text;
}

static int compare_doubles(int op, double x, double y)
{
    switch (op) {
    case Py_LT: return x < y;
    case Py_LE: return x <= y;
    case Py_EQ: return x == y;
    case Py_NE: return x != y;
    case Py_GT: return x > y;
    default: return x >= y;
    }
}

/* two single values (a pair, or NULL and a number): numbers when both have one, else
 * their strings */
static int compare_one(Stepper *s, int op, PyObject *a, double an, PyObject *b, double bn)
{
    double x = an, y = bn;
    int hx = a == NULL ? 1 : number_of(a, &x);
    int hy = b == NULL ? 1 : number_of(b, &y);
    if (hx && hy)
        return compare_doubles(op, x, y);
    PyObject *sa = string_of(s, a, an);
    PyObject *sb = sa ? string_of(s, b, bn) : NULL;
    int r = sb ? PyObject_RichCompareBool(sa, sb, op) : -1;
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    return r;
}

/* the values of an operand as a count and an accessor: pair i (NULL for a number) */
static Py_ssize_t count_of(Val *v)
{
    return v->kind == V_EMPTY ? 0 : v->kind == V_MANY ? PyList_GET_SIZE(v->obj) : 1;
}

static int pair_at(Val *v, Py_ssize_t i, PyObject **pair)
{
    if (v->kind == V_NUM) {
        *pair = NULL;
        return 0;
    }
    PyObject *x = v->kind == V_MANY ? PyList_GET_ITEM(v->obj, i) : v->obj;
    if (!PyTuple_Check(x) || PyTuple_GET_SIZE(x) != 2) {
        PyErr_SetString(PyExc_TypeError, "step: a value is not a pair");
        return -1;
    }
    *pair = x;
    return 0;
}

static int compare_values(Stepper *s, int op, Val *a, Val *b)
{
    Py_ssize_t na = count_of(a), nb = count_of(b);
    for (Py_ssize_t i = 0; i < na; i++) {
        PyObject *x;
        if (pair_at(a, i, &x) < 0)
            return -1;
        for (Py_ssize_t k = 0; k < nb; k++) {
            PyObject *y;
            if (pair_at(b, k, &y) < 0)
                return -1;
            int r = compare_one(s, op, x, a->num, y, b->num);
            if (r != 0)
                return r;
        }
    }
    return 0;
}

static int eval_cond(Stepper *s, int at, Ctx *c)
{
    Node *n = &s->nodes[at];
    int r;
    switch (n->kind) {
    case N_CMP: {
        Val a, b;
        if (eval_value(s, n->left, c, &a) < 0)
            return -1;
        if (eval_value(s, n->right, c, &b) < 0) {
            release(&a);
            return -1;
        }
        r = compare_values(s, n->op, &a, &b);
        release(&a);
        release(&b);
        return r;
    }
    case N_AND:
        r = eval_cond(s, n->left, c);
        return r <= 0 ? r : eval_cond(s, n->right, c);
    case N_OR:
        r = eval_cond(s, n->left, c);
        return r != 0 ? r : eval_cond(s, n->right, c);
    case N_NOT:
        r = eval_cond(s, n->left, c);
        return r < 0 ? r : !r;
    case N_CALL: {
        PyObject *found = PyObject_CallFunctionObjArgs(n->obj, c->regs, c->e, c->p, NULL);
        if (found == NULL)
            return -1;
        r = PyObject_IsTrue(found);
        Py_DECREF(found);
        return r;
    }
    default:
        PyErr_SetString(PyExc_ValueError, "step: a node that is no condition");
        return -1;
    }
}

/* condition ``id``: decided once per element when it reads no partial match */
static int condition(Stepper *s, int id, Ctx *c)
{
    if (!s->element_only[id])
        return eval_cond(s, s->roots[id], c);
    if (s->cache[id] < 0) {
        int r = eval_cond(s, s->roots[id], c);
        if (r < 0)
            return -1;
        s->cache[id] = (signed char)r;
    }
    return s->cache[id];
}

/* the value a Kleene-* run's register takes with e: (first, last, count, chain of its
 * elements when they are kept), a new run when q is None */
static PyObject *kleene_value(Stepper *s, PyObject *q, PyObject *e)
{
    if (q == Py_None) {
        PyObject *chain = s->keep_nodes ? PyTuple_Pack(2, e, Py_None) : Py_NewRef(Py_None);
        PyObject *value = chain ? PyTuple_Pack(4, e, e, s->one, chain) : NULL;
        Py_XDECREF(chain);
        return value;
    }
    if (!is_run(q))
        return NULL;
    Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(q, 2));
    PyObject *count = n == -1 && PyErr_Occurred() ? NULL : PyLong_FromSsize_t(n + 1);
    PyObject *chain = count == NULL ? NULL
                      : s->keep_nodes ? PyTuple_Pack(2, e, PyTuple_GET_ITEM(q, 3))
                                      : Py_NewRef(Py_None);
    if (chain == NULL) {
        Py_XDECREF(count);
        return NULL;
    }
    if (Py_REFCNT(q) == 1) { /* nothing else holds the run's register: changed in place */
        PyObject *old_last = PyTuple_GET_ITEM(q, 1), *old_count = PyTuple_GET_ITEM(q, 2);
        PyObject *old_chain = PyTuple_GET_ITEM(q, 3);
        PyTuple_SET_ITEM(q, 1, Py_NewRef(e));
        PyTuple_SET_ITEM(q, 2, count);
        PyTuple_SET_ITEM(q, 3, chain);
        Py_DECREF(old_last);
        Py_DECREF(old_count);
        Py_DECREF(old_chain);
        return Py_NewRef(q);
    }
    PyObject *value = PyTuple_Pack(4, PyTuple_GET_ITEM(q, 0), e, count, chain);
    Py_DECREF(count);
    Py_DECREF(chain);
    return value;
}

/* the registers once ``e`` is bound to the block's slot. With ``reuse`` (the partial
 * match's last move, when nothing but the dying list of partial matches holds it) the
 * registers are changed in place where nothing else holds them, as zip() reuses its
 * tuple; otherwise copied. */
static PyObject *bind(Stepper *s, Block *b, PyObject *regs, PyObject *e, int reuse)
{
    PyObject *q = PyTuple_GET_ITEM(regs, b->slot);
    int in_place = reuse && Py_REFCNT(regs) == 1;
    int keep_q = !in_place && b->star; /* regs lives on: its run's register must not change */
    if (keep_q)
        Py_INCREF(q);
    PyObject *value = !b->star ? Py_NewRef(e) : kleene_value(s, q, e);
    if (keep_q)
        Py_DECREF(q);
    if (value == NULL)
        return NULL;
    if (in_place) {
        PyTuple_SET_ITEM(regs, b->slot, value);
        Py_DECREF(q);
        return Py_NewRef(regs);
    }
    PyObject *bound = PyTuple_New(s->width);
    if (bound == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < s->width; i++) {
        PyObject *x = i == b->slot ? value : Py_NewRef(PyTuple_GET_ITEM(regs, i));
        PyTuple_SET_ITEM(bound, i, x);
    }
    return bound;
}

static int add_count(PyObject *counts, Py_ssize_t i, Py_ssize_t by)
{
    if (by == 0)
        return 0;
    PyObject *old = PyList_GET_ITEM(counts, i);
    Py_ssize_t n = PyLong_AsSsize_t(old);
    if (n == -1 && PyErr_Occurred())
        return -1;
    PyObject *sum = PyLong_FromSsize_t(n + by);
    if (sum == NULL)
        return -1;
    PyList_SET_ITEM(counts, i, sum);
    Py_DECREF(old);
    return 0;
}

/* a match ends here: count it in place, or list it */
static int found_match(Stepper *s, PyObject *lst, PyObject *bound, PyObject **found)
{
    if (!s->count_in_place) {
        if (*found == NULL && (*found = PyList_New(0)) == NULL)
            return -1;
        return PyList_Append(*found, bound);
    }
    PyObject *counts = PyObject_GetAttr(lst, s->s_counts);
    if (counts == NULL)
        return -1;
    int r = -1;
    if (!PyList_Check(counts) || PyList_GET_SIZE(counts) != s->ncounts + 1) {
        PyErr_SetString(PyExc_TypeError, "step: the list's counts are not a list of its terms");
        goto out;
    }
    if (add_count(counts, 0, 1) < 0)
        goto out;
    for (int i = 0; i < s->ncounts; i++) {
        PyObject *q = PyTuple_GET_ITEM(bound, s->count_slots[i]);
        Py_ssize_t by = 0;
        if (q != Py_None) {
            if (s->count_whole[i] && !is_run(q))
                goto out;
            by = s->count_whole[i] ? PyLong_AsSsize_t(PyTuple_GET_ITEM(q, 2)) : 1;
            if (by == -1 && PyErr_Occurred())
                goto out;
        }
        if (add_count(counts, i + 1, by) < 0)
            goto out;
    }
    r = 0;
out:
    Py_DECREF(counts);
    return r;
}

/* one block: the partial match ``regs`` (ending in item b->j) moved to item b->k by e */
static int run_block(Stepper *s, Block *b, Ctx *c, PyObject *thread, PyObject *regs,
                     PyObject *lst, PyObject *new, PyObject **found)
{
    if (b->name != NULL) {
        PyObject *tag = PyList_GET_ITEM(c->e, 2);
        if (tag != b->name) {
            int same = PyObject_RichCompareBool(tag, b->name, Py_EQ);
            if (same <= 0)
                return same;
        }
    }
    c->regs = regs;
    for (int i = 0; i < b->npre; i++) {
        int r = condition(s, b->pre[i], c);
        if (r <= 0)
            return r;
    }
    /* the partial match's last move, where only the dying list holds it: in place */
    int reuse = thread != NULL && Py_REFCNT(thread) == 1;
    PyObject *bound = b->slot >= 0 ? bind(s, b, regs, c->e, reuse) : Py_NewRef(regs);
    if (bound == NULL)
        return -1;
    c->regs = bound;
    int r = 0;
    for (int i = 0; i < b->nconds; i++) {
        r = condition(s, b->conds[i], c);
        if (r <= 0)
            goto out;
    }
    PyObject *item;
    if (reuse && bound == regs) {
        PyObject *old = PyTuple_GET_ITEM(thread, 0);
        PyTuple_SET_ITEM(thread, 0, Py_NewRef(b->k_obj));
        Py_DECREF(old);
        item = Py_NewRef(thread);
    } else {
        item = PyTuple_Pack(2, b->k_obj, bound);
    }
    if (item == NULL || PyList_Append(new, item) < 0) {
        Py_XDECREF(item);
        r = -1;
        goto out;
    }
    Py_DECREF(item);
    r = 0;
    if (b->final) {
        for (int i = 0; i < b->nrest; i++) {
            r = condition(s, b->rest[i], c);
            if (r <= 0)
                goto out;
        }
        r = found_match(s, lst, bound, found);
    }
out:
    Py_DECREF(bound);
    return r < 0 ? -1 : 0;
}

static PyObject *stepper_call(PyObject *self, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames)
{
    Stepper *s = (Stepper *)self;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "step(list, element) takes two arguments");
        return NULL;
    }
    PyObject *lst = args[0], *e = args[1];
    if (s->emit == NULL) {
        PyErr_SetString(PyExc_TypeError, "step: a Stepper not made, or let go");
        return NULL;
    }
    if (!PyList_Check(e) || PyList_GET_SIZE(e) < 4) {
        PyErr_SetString(PyExc_TypeError, "step: an element is not a list");
        return NULL;
    }
    PyObject *threads = PyObject_GetAttr(lst, s->s_threads);
    PyObject *p = threads ? PyObject_GetAttr(lst, s->s_pred) : NULL;
    PyObject *new = p ? PyList_New(0) : NULL, *found = NULL, *result = NULL;
    if (new == NULL)
        goto out;
    if (!PyList_Check(threads)) {
        PyErr_SetString(PyExc_TypeError, "step: the list's threads are not a list");
        goto out;
    }
    memset(s->cache, -1, (size_t)s->nconds);
    Ctx c = {e, p, NULL};
    /* the list of partial matches dies with this step unless something else holds it */
    int dying = Py_REFCNT(threads) <= 2;
    for (Py_ssize_t t = 0; t < PyList_GET_SIZE(threads); t++) {
        PyObject *thread = PyList_GET_ITEM(threads, t);
        if (!PyTuple_Check(thread) || PyTuple_GET_SIZE(thread) != 2 ||
            !PyTuple_Check(PyTuple_GET_ITEM(thread, 1)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(thread, 1)) != s->width) {
            PyErr_SetString(PyExc_TypeError, "step: a partial match is not (item, registers)");
            goto out;
        }
        long j = PyLong_AsLong(PyTuple_GET_ITEM(thread, 0));
        if (j < 0 || j >= s->nitems) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "step: a partial match's item out of range");
            goto out;
        }
        PyObject *regs = PyTuple_GET_ITEM(thread, 1);
        Py_ssize_t last = s->first_block[j + 2] - 1;
        for (Py_ssize_t b = s->first_block[j + 1]; b <= last; b++) {
            PyObject *reusable = b == last && dying ? thread : NULL;
            if (run_block(s, &s->blocks[b], &c, reusable, regs, lst, new, &found) < 0)
                goto out;
        }
    }
    for (Py_ssize_t b = s->first_block[0]; b < s->first_block[1]; b++)
        if (run_block(s, &s->blocks[b], &c, NULL, s->empty, lst, new, &found) < 0)
            goto out;
    if (s->dedupe != Py_None && PyList_GET_SIZE(new) > 1) {
        PyObject *kept = PyObject_CallOneArg(s->dedupe, new);
        if (kept == NULL)
            goto out;
        Py_SETREF(new, kept);
    }
    if (PyObject_SetAttr(lst, s->s_threads, new) < 0 || PyObject_SetAttr(lst, s->s_pred, e) < 0)
        goto out;
    if (found != NULL && PyList_GET_SIZE(found) > 0) {
        PyObject *r = PyObject_CallFunctionObjArgs(s->emit, lst, found, NULL);
        if (r == NULL)
            goto out;
        Py_DECREF(r);
    }
    result = Py_NewRef(Py_None);
out:
    Py_XDECREF(threads);
    Py_XDECREF(p);
    Py_XDECREF(new);
    Py_XDECREF(found);
    return result;
}

/* The Stepper holds its run's ``emit`` (a bound method: the run holds the Stepper), so it
 * takes part in the cyclic collector. */
static int stepper_traverse(PyObject *self, visitproc visit, void *arg)
{
    Stepper *s = (Stepper *)self;
    for (Py_ssize_t i = 0; s->nodes != NULL && i < s->nnodes; i++)
        Py_VISIT(s->nodes[i].obj);
    Py_VISIT(s->empty);
    Py_VISIT(s->emit);
    Py_VISIT(s->dedupe);
    Py_VISIT(s->arithmetic_pair);
    Py_VISIT(s->as_string);
    return 0;
}

static int stepper_clear(PyObject *self)
{
    Stepper *s = (Stepper *)self;
    for (Py_ssize_t i = 0; s->nodes != NULL && i < s->nnodes; i++)
        Py_CLEAR(s->nodes[i].obj);
    s->nnodes = 0; /* (emit is gone too: a call now fails, as for a Stepper never made) */
    Py_CLEAR(s->empty);
    Py_CLEAR(s->emit);
    Py_CLEAR(s->dedupe);
    Py_CLEAR(s->arithmetic_pair);
    Py_CLEAR(s->as_string);
    return 0;
}

static void stepper_dealloc(PyObject *self)
{
    Stepper *s = (Stepper *)self;
    PyObject_GC_UnTrack(self);
    stepper_clear(self);
    for (Py_ssize_t i = 0; s->blocks != NULL && i < s->nblocks; i++) {
        Py_XDECREF(s->blocks[i].name);
        Py_XDECREF(s->blocks[i].k_obj);
    }
    PyMem_Free(s->nodes);
    PyMem_Free(s->blocks);
    PyMem_Free(s->roots);
    PyMem_Free(s->element_only);
    PyMem_Free(s->cache);
    PyMem_Free(s->first_block);
    PyMem_Free(s->ints);
    PyMem_Free(s->count_slots);
    Py_XDECREF(s->s_threads);
    Py_XDECREF(s->s_pred);
    Py_XDECREF(s->s_counts);
    Py_XDECREF(s->one);
    Py_TYPE(self)->tp_free(self);
}

/* a tuple of ints (condition ids below ``limit``) into ints[*used ..] */
static int id_list(PyObject *seq, Py_ssize_t limit, int *ints, Py_ssize_t *used, int **out,
                   int *count)
{
    if (!PyTuple_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "Stepper: a block's conditions are not a tuple");
        return -1;
    }
    *out = ints + *used;
    *count = (int)PyTuple_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(seq, i));
        if (v < 0 || v >= limit) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "Stepper: a condition id out of range");
            return -1;
        }
        ints[(*used)++] = (int)v;
    }
    return 0;
}

static int load_nodes(Stepper *s, PyObject *nodes)
{
    s->nnodes = PyList_GET_SIZE(nodes);
    s->nodes = PyMem_Calloc(s->nnodes ? s->nnodes : 1, sizeof(Node));
    if (s->nodes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < s->nnodes; i++) {
        Node *n = &s->nodes[i];
        PyObject *obj;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(nodes, i), "iiiiiiiiO;Stepper: a node", &n->kind,
                              &n->op, &n->src, &n->slot, &n->at, &n->many, &n->left,
                              &n->right, &obj))
            return -1;
        n->obj = Py_NewRef(obj);
        int children = n->kind == N_ARITH || n->kind == N_CMP || n->kind == N_AND ||
                       n->kind == N_OR;
        if (n->kind < N_CONST || n->kind > N_CALL ||
            (children && (n->left < 0 || n->left >= i || n->right < 0 || n->right >= i)) ||
            (n->kind == N_NOT && (n->left < 0 || n->left >= i)) ||
            (n->kind == N_FIELD && (n->src < S_E || n->src > S_LAST || n->at < 0 ||
                                    (n->src >= S_SLOT && (n->slot < 0 || n->slot >= s->width)))) ||
            (n->kind == N_CONST && (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2)) ||
            (n->kind == N_CMP && (n->op < Py_LT || n->op > Py_GE)) ||
            (n->kind == N_ARITH && (n->op < A_ADD || n->op > A_DIV))) {
            PyErr_Format(PyExc_ValueError, "Stepper: node %zd is not well formed", i);
            return -1;
        }
    }
    return 0;
}

static int stepper_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    Stepper *s = (Stepper *)self;
    PyObject *nodes, *conds, *blocks, *empty, *counts, *emit, *dedupe, *arithmetic_pair,
        *as_string;
    Py_ssize_t nitems;
    int keep_nodes;
    if (s->nodes != NULL) {
        PyErr_SetString(PyExc_TypeError, "Stepper: already made");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!nO!pOOOOO:Stepper", &PyList_Type, &nodes, &PyList_Type,
                          &conds, &PyList_Type, &blocks, &nitems, &PyTuple_Type, &empty,
                          &keep_nodes, &counts, &emit, &dedupe, &arithmetic_pair, &as_string))
        return -1;
    s->vectorcall = stepper_call;
    s->width = PyTuple_GET_SIZE(empty);
    s->nitems = nitems;
    s->keep_nodes = keep_nodes;
    s->empty = Py_NewRef(empty);
    s->emit = Py_NewRef(emit);
    s->dedupe = Py_NewRef(dedupe);
    s->arithmetic_pair = Py_NewRef(arithmetic_pair);
    s->as_string = Py_NewRef(as_string);
    s->s_threads = PyUnicode_InternFromString("threads");
    s->s_pred = PyUnicode_InternFromString("pred");
    s->s_counts = PyUnicode_InternFromString("counts");
    s->one = PyLong_FromLong(1);
    if (!s->s_threads || !s->s_pred || !s->s_counts || !s->one || load_nodes(s, nodes) < 0)
        return -1;
    s->nconds = PyList_GET_SIZE(conds);
    s->roots = PyMem_Calloc(s->nconds + 1, sizeof(int));
    s->element_only = PyMem_Calloc(s->nconds + 1, 1);
    s->cache = PyMem_Calloc(s->nconds + 1, 1);
    if (!s->roots || !s->element_only || !s->cache) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < s->nconds; i++) {
        int root, only;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(conds, i), "ip;Stepper: a condition", &root, &only))
            return -1;
        if (root < 0 || root >= s->nnodes) {
            PyErr_SetString(PyExc_ValueError, "Stepper: a condition's node out of range");
            return -1;
        }
        s->roots[i] = root;
        s->element_only[i] = (signed char)only;
    }
    s->count_in_place = counts != Py_None;
    if (s->count_in_place) {
        if (!PyTuple_Check(counts)) {
            PyErr_SetString(PyExc_TypeError, "Stepper: the counted terms are not a tuple");
            return -1;
        }
        s->ncounts = (int)PyTuple_GET_SIZE(counts);
        s->count_slots = PyMem_Calloc(2 * s->ncounts + 1, sizeof(int));
        if (s->count_slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->count_whole = s->count_slots + s->ncounts;
        for (int i = 0; i < s->ncounts; i++) {
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(counts, i), "ip;Stepper: a counted term",
                                  &s->count_slots[i], &s->count_whole[i]))
                return -1;
            if (s->count_slots[i] < 0 || s->count_slots[i] >= s->width) {
                PyErr_SetString(PyExc_ValueError, "Stepper: a counted term's slot out of range");
                return -1;
            }
        }
    }
    /* blocks, in order, grouped by their item j (-1: a new partial match first) */
    s->nblocks = PyList_GET_SIZE(blocks);
    s->blocks = PyMem_Calloc(s->nblocks + 1, sizeof(Block));
    s->first_block = PyMem_Calloc(nitems + 2, sizeof(Py_ssize_t));
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < s->nblocks; i++) {
        PyObject *b = PyList_GET_ITEM(blocks, i);
        if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != 9) {
            PyErr_SetString(PyExc_TypeError, "Stepper: a block is not a 9-tuple");
            return -1;
        }
        for (int f = 3; f <= 4; f++)
            if (PyTuple_Check(PyTuple_GET_ITEM(b, f)))
                total += PyTuple_GET_SIZE(PyTuple_GET_ITEM(b, f));
        if (PyTuple_Check(PyTuple_GET_ITEM(b, 8)))
            total += PyTuple_GET_SIZE(PyTuple_GET_ITEM(b, 8));
    }
    s->ints = PyMem_Calloc(total + 1, sizeof(int));
    if (!s->blocks || !s->first_block || !s->ints) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t used = 0;
    long last_j = -1;
    for (Py_ssize_t i = 0; i < s->nblocks; i++) {
        PyObject *t = PyList_GET_ITEM(blocks, i), *name, *pre, *cs, *rest;
        Block *b = &s->blocks[i];
        if (!PyArg_ParseTuple(t, "iiOOOipiO;Stepper: a block", &b->j, &b->k, &name, &pre, &cs,
                              &b->slot, &b->star, &b->final, &rest))
            return -1;
        if (b->j < -1 || b->j >= nitems || b->k < 0 || b->k >= nitems || b->j < last_j ||
            b->slot >= s->width ||
            (name != Py_None && !PyUnicode_Check(name))) {
            PyErr_SetString(PyExc_ValueError, "Stepper: a block is not well formed");
            return -1;
        }
        last_j = b->j;
        b->name = name == Py_None ? NULL : Py_NewRef(name);
        b->k_obj = PyLong_FromLong(b->k);
        if (b->k_obj == NULL || id_list(pre, s->nconds, s->ints, &used, &b->pre, &b->npre) < 0 ||
            id_list(cs, s->nconds, s->ints, &used, &b->conds, &b->nconds) < 0 ||
            id_list(rest, s->nconds, s->ints, &used, &b->rest, &b->nrest) < 0)
            return -1;
    }
    /* first_block[j + 1]: the first block of item j; first_block[nitems + 1]: the end */
    Py_ssize_t at = 0;
    for (Py_ssize_t j = -1; j <= nitems; j++) {
        while (at < s->nblocks && s->blocks[at].j < j)
            at++;
        s->first_block[j + 1] = at;
    }
    return 0;
}

static PyTypeObject StepperType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xseq._lists.Stepper",
    .tp_basicsize = sizeof(Stepper),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = stepper_traverse,
    .tp_clear = stepper_clear,
    .tp_free = PyObject_GC_Del,
    .tp_vectorcall_offset = offsetof(Stepper, vectorcall),
    .tp_doc = "Stepper(nodes, conditions, blocks, items, empty registers, keep_nodes, counted "
              "terms or None, emit, dedupe or None, arithmetic_pair, as_string)\n\nA flat "
              "sequence pattern's step function (see xcep/xseq/sequence.py, _StepProgram): "
              "step(list, element).",
    .tp_new = PyType_GenericNew,
    .tp_init = stepper_init,
    .tp_dealloc = stepper_dealloc,
    .tp_call = PyVectorcall_Call,
};

/* ``Taker(step, lists, new_list)``: ``SequenceRun.take`` for a partitioned run, called by
 * the list reader once per element: ``step(lists[key], element)``, the partition's list
 * made by ``new_list(key)`` the first time. */
typedef struct {
    PyObject_HEAD
    PyObject *step, *lists, *new_list;
    vectorcallfunc vectorcall;
} Taker;

static PyObject *taker_call(PyObject *self, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    Taker *t = (Taker *)self;
    if (t->lists == NULL) {
        PyErr_SetString(PyExc_TypeError, "take: a Taker not made, or let go");
        return NULL;
    }
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "take(key, element) takes two arguments");
        return NULL;
    }
    PyObject *lst = PyDict_GetItemWithError(t->lists, args[0]);
    if (lst != NULL) {
        Py_INCREF(lst);
    } else {
        if (PyErr_Occurred())
            return NULL;
        lst = PyObject_CallOneArg(t->new_list, args[0]);
        if (lst == NULL || PyDict_SetItem(t->lists, args[0], lst) < 0) {
            Py_XDECREF(lst);
            return NULL;
        }
    }
    PyObject *step_args[2] = {lst, args[1]};
    PyObject *r = PyObject_Vectorcall(t->step, step_args, 2, NULL);
    Py_DECREF(lst);
    return r;
}

static int taker_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    Taker *t = (Taker *)self;
    PyObject *step, *lists, *new_list;
    if (!PyArg_ParseTuple(args, "OO!O:Taker", &step, &PyDict_Type, &lists, &new_list))
        return -1;
    Py_XSETREF(t->step, Py_NewRef(step));
    Py_XSETREF(t->lists, Py_NewRef(lists));
    Py_XSETREF(t->new_list, Py_NewRef(new_list));
    t->vectorcall = taker_call;
    return 0;
}

static int taker_traverse(PyObject *self, visitproc visit, void *arg)
{
    Taker *t = (Taker *)self;
    Py_VISIT(t->step);
    Py_VISIT(t->lists);
    Py_VISIT(t->new_list);
    return 0;
}

static int taker_clear(PyObject *self)
{
    Taker *t = (Taker *)self;
    Py_CLEAR(t->step);
    Py_CLEAR(t->lists);
    Py_CLEAR(t->new_list);
    return 0;
}

static void taker_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    taker_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject TakerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xcep.xseq._lists.Taker",
    .tp_basicsize = sizeof(Taker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = taker_traverse,
    .tp_clear = taker_clear,
    .tp_free = PyObject_GC_Del,
    .tp_vectorcall_offset = offsetof(Taker, vectorcall),
    .tp_doc = "Taker(step, lists, new_list)\n\nSequenceRun.take for a partitioned run: "
              "take(key, element) steps the element in its partition's list.",
    .tp_new = PyType_GenericNew,
    .tp_init = taker_init,
    .tp_dealloc = taker_dealloc,
    .tp_call = PyVectorcall_Call,
};

static PyMethodDef methods[] = {
    {"read", read_list, METH_VARARGS,
     "read(kinds, depths, names, docs, nodes, values, name table, path ids, key id, wanted, "
     "width, keep_raw, at_close, partitioned, ok, pending, pending key, doc, take, mark, "
     "parent-opens marker, list-ends marker, numbers, to_number) -> (pending, pending key, "
     "doc)\n\nListReader.read for lists whose fields are attributes: see "
     "xcep/xseq/sequence.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lists", "The flat-sequence runtime's list reader and step function.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lists(void)
{
    if (PyType_Ready(&StepperType) < 0 || PyType_Ready(&TakerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddObjectRef(m, "Stepper", (PyObject *)&StepperType) < 0 ||
                      PyModule_AddObjectRef(m, "Taker", (PyObject *)&TakerType) < 0))
        Py_CLEAR(m);
    return m;
}

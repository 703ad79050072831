/* The XSeq automaton's quiet stretches, read outside Python.
 *
 * Where no run of the pushdown automaton can move — inside a subtree nobody waits in
 * (the run skips it), or below an element whose only waiters wait for descendants of
 * other names (``//name`` steps) — the events change nothing but the stack. ``stretch``
 * finds how far such a stretch goes in one batch's columns and what it leaves on the
 * stack; Python then pops and pushes those entries and goes on from where it stopped
 * (xcep/xseq/routing.py, ``Driver.feed``). See docs/xseq.md, "Quiet stretches".
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { OPEN = 0, ATTR = 1, TEXT = 2, CLOSE = 3 };

static PyObject *stretch(PyObject *module, PyObject *args)
{
    Py_buffer kinds, names, wanted, keyed, child;
    Py_ssize_t start, end, pops;
    PyObject *interesting, *attributes = Py_None, *children = Py_None;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*nnnO|OO:stretch", &kinds, &names, &start, &end, &pops,
                          &interesting, &attributes, &children))
        return NULL;
    PyObject *result = NULL, *opened = NULL;
    Py_ssize_t *stack = NULL, depth = 0, capacity = 64, popped = 0;
    wanted.buf = keyed.buf = child.buf = NULL;
    if (interesting != Py_None && PyObject_GetBuffer(interesting, &wanted, PyBUF_SIMPLE) < 0)
        goto out;
    if (attributes != Py_None && PyObject_GetBuffer(attributes, &keyed, PyBUF_SIMPLE) < 0)
        goto out;
    if (children != Py_None && PyObject_GetBuffer(children, &child, PyBUF_SIMPLE) < 0)
        goto out;
    if (kinds.itemsize != 1 || names.len != kinds.len * 4 || start < 0 || end > kinds.len) {
        PyErr_SetString(PyExc_ValueError, "stretch: kinds (array B) and names (array i) of one batch");
        goto out;
    }
    stack = PyMem_Malloc(capacity * sizeof *stack);
    if (stack == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    const unsigned char *kind = kinds.buf;
    const int *name = names.buf;
    const unsigned char *want = wanted.buf, *key = keyed.buf, *want_child = child.buf;
    Py_ssize_t known = wanted.buf != NULL ? wanted.len : 0;
    Py_ssize_t known_keys = keyed.buf != NULL ? keyed.len : 0;
    Py_ssize_t known_children = child.buf != NULL ? child.len : 0;
    Py_ssize_t i = start;
    while (i < end) {
        int k = kind[i];
        if (k == OPEN) {
            int id = name[i];
            /* a name some run waits for (or one the table does not know yet): Python's */
            if (wanted.buf != NULL && (id < 0 || id >= known || want[id]))
                break;
            /* a child of the element on top of the stack that its child waiters want */
            if (want_child != NULL && depth == 0 && popped == 0 &&
                (id < 0 || id >= known_children || want_child[id]))
                break;
            Py_ssize_t j = i + 1;
            int keyed_here = 0; /* an attribute some run's waiter needs (marked, or unknown) */
            while (j < end && kind[j] == ATTR) {
                if (key != NULL && (name[j] < 0 || name[j] >= known_keys || key[name[j]]))
                    keyed_here = 1;
                j++;
            }
            if (j == end || keyed_here) /* attributes that may go on in the next batch, or wanted */
                break;
            if (depth == capacity) {
                Py_ssize_t *grown = PyMem_Realloc(stack, 2 * capacity * sizeof *stack);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto out;
                }
                stack = grown;
                capacity *= 2;
            }
            stack[depth++] = i;
            i = j;
        } else if (k == CLOSE) {
            if (depth > 0)
                depth--;
            else if (popped < pops)
                popped++;
            else
                break; /* it closes an element Python must see close */
            i++;
        } else if (k == TEXT) {
            i++;
        } else {
            break;
        }
    }
    opened = PyList_New(depth);
    if (opened == NULL)
        goto out;
    for (Py_ssize_t d = 0; d < depth; d++) {
        PyObject *at = PyLong_FromSsize_t(stack[d]);
        if (at == NULL)
            goto out;
        PyList_SET_ITEM(opened, d, at);
    }
    result = Py_BuildValue("nnO", i, popped, opened);
out:
    Py_XDECREF(opened);
    PyMem_Free(stack);
    if (wanted.buf != NULL)
        PyBuffer_Release(&wanted);
    if (keyed.buf != NULL)
        PyBuffer_Release(&keyed);
    if (child.buf != NULL)
        PyBuffer_Release(&child);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&names);
    return result;
}

static PyMethodDef methods[] = {
    {"stretch", stretch, METH_VARARGS,
     "stretch(kinds, names, start, end, pops, interesting, attributes=None, children=None) "
     "-> (stop, popped, opened)\n\n"
     "From kinds[start] on (array B and array i columns of a batch), the events that need "
     "no run of the automaton: every open whose name id is not marked in the bytes "
     "`interesting` (None: no name is), nor in `children` when it is a child of the "
     "element on top of the stack, and none of whose attributes' name ids is marked "
     "in the bytes `attributes` (None: none is), its attributes, texts, and closes — of elements "
     "opened in the stretch, then of at most `pops` elements open before it. stop: the "
     "first event Python must read; popped: the elements open before that closed; "
     "opened: the positions of the open events of those still open at stop."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_quiet", "The XSeq automaton's quiet stretches, read outside Python.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__quiet(void) { return PyModule_Create(&module); }

/* read_plan: a filter of the counted form read straight into its plan (counted_plans.py: Plan),
 * without the parser's tree and the rewrite (workload.py: _new_shape; the reference is
 * counted_plans.plan_of(rewrite.normalize(parser.parse_filter(text)))).
 *
 * The counted form: an absolute path of element names, at most one step with predicates (the
 * anchor), an @name or text() step only last; a predicate a boolean (and, or, not(),
 * parentheses) of atoms, each a relative path of names (a last @name or text(); `.` alone only
 * where it is tested) alone, compared with a number or a string, or in starts-with(PATH,
 * STRING) or contains(PATH, STRING). What is not plainly of that form — `//`, `*`, `..`,
 * axes, true(), a digit outside ASCII, predicates on more than one step (nested anchors:
 * counted_plans.plan_of), a syntax error — is None, not an error: the parser reads it (and says
 * what is wrong). The tokens are parser.py's TOKEN_PATTERN's; what is read is
 * read as the parser and the rewrite read it, but for and/or left unflattened and atoms
 * repeated in a formula (the same value: tested on random filters). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "filter_text.h"

enum { K_END, K_NUMBER, K_STRING, K_OP, K_NAME };
enum { F_TRUE = -1, F_NOT = -3, F_AND = -4, F_OR = -5 }; /* counted_plans.py's formula operators */

typedef struct {
    int kind;
    Py_ssize_t start, end;
} Token;

typedef struct {
    PyObject *text;
    int ukind;
    const void *data;
    Token *tokens;
    Py_ssize_t count, at; /* the tokens (an end token after them) and the next one */
    PyObject *atoms;      /* list of (labels, op, value) */
    PyObject *code;       /* list of ints: the formula, postfix */
    int not_form;         /* set where the text is not plainly of the form: None */
    int all_tokens;       /* tokenize every token of TOKEN_PATTERN's (filter_tokens), not only the
                           * counted form's ("::", digits outside ASCII) */
} Reader;

#define CH(i) PyUnicode_READ(r->ukind, r->data, (i))

/* -1: not of the form (no error set) */
static int not_form(Reader *r)
{
    r->not_form = 1;
    return -1;
}

static int two_char_op(Py_UCS4 a, Py_UCS4 b) /* of TOKEN_PATTERN's ops; "::" (an axis) is not read */
{
    return (a == '/' && b == '/') || (a == '.' && b == '.') ||
           (b == '=' && (a == '!' || a == '<' || a == '>'));
}

/* TOKEN_PATTERN's tokens of the text, an end token after them; -1 (not_form or an error) */
static int tokenize(Reader *r, Py_ssize_t n)
{
    Token *t = r->tokens = PyMem_Malloc((size_t)(n + 1) * sizeof(Token));
    if (t == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0, count = 0;
    for (;;) {
        while (pos < n && Py_UNICODE_ISSPACE(CH(pos)))
            pos++;
        if (pos == n)
            break;
        Py_UCS4 c = CH(pos);
        Py_ssize_t p = pos + (c == '-'), end = -1;
        int kind = K_NUMBER;
        if (p < n && shape_digit(CH(p))) { /* -?(\d+(\.\d*)?|\.\d+) */
            while (p < n && shape_digit(CH(p)))
                p++;
            if (p < n && CH(p) == '.')
                for (p++; p < n && shape_digit(CH(p)); p++)
                    ;
            end = p;
        } else if (p + 1 < n && CH(p) == '.' && shape_digit(CH(p + 1))) {
            for (p++; p < n && shape_digit(CH(p)); p++)
                ;
            end = p;
        }
        if (end >= 0) {
            for (Py_ssize_t i = pos; i < end && !r->all_tokens; i++)
                if (CH(i) >= 128) /* a digit outside ASCII: the parser's */
                    return not_form(r);
        } else if (r->all_tokens && c == ':' && pos + 1 < n && CH(pos + 1) == ':') {
            kind = K_OP, end = pos + 2;
        } else if (c == '\'' || c == '"') {
            for (p = pos + 1; p < n && CH(p) != c; p++)
                ;
            if (p == n)
                return not_form(r);
            kind = K_STRING, end = p + 1;
        } else if (pos + 1 < n && two_char_op(c, CH(pos + 1))) {
            kind = K_OP, end = pos + 2;
        } else if (c < 128 && strchr("/[]()@*.,=<>", (int)c) != NULL) {
            kind = K_OP, end = pos + 1;
        } else if (shape_name_start(c)) { /* a name, or prefix:name */
            for (p = pos + 1; p < n && shape_name_char(CH(p)); p++)
                ;
            if (p + 1 < n && CH(p) == ':' && shape_name_start(CH(p + 1)))
                for (p += 2; p < n && shape_name_char(CH(p)); p++)
                    ;
            kind = K_NAME, end = p;
        } else {
            return not_form(r); /* "::", a character no token takes */
        }
        t[count].kind = kind, t[count].start = pos, t[count].end = end;
        count++;
        pos = end;
    }
    t[count].kind = K_END, t[count].start = t[count].end = n;
    r->count = count;
    return 0;
}

static const Token *token(Reader *r, Py_ssize_t ahead)
{
    Py_ssize_t i = r->at + ahead;
    return &r->tokens[i < r->count ? i : r->count];
}

/* Whether the token `ahead` of the next is an op or a name that reads `word` (the parser's
 * `at`). */
static int word_is(Reader *r, Py_ssize_t ahead, const char *word)
{
    const Token *t = token(r, ahead);
    Py_ssize_t length = (Py_ssize_t)strlen(word);
    if ((t->kind != K_OP && t->kind != K_NAME) || t->end - t->start != length)
        return 0;
    for (Py_ssize_t k = 0; k < length; k++)
        if (CH(t->start + k) != (Py_UCS4)(unsigned char)word[k])
            return 0;
    return 1;
}

static int expect(Reader *r, const char *word)
{
    if (!word_is(r, 0, word))
        return not_form(r);
    r->at++;
    return 0;
}

static int emit(Reader *r, long op)
{
    PyObject *number = PyLong_FromLong(op);
    int failed = number == NULL || PyList_Append(r->code, number) < 0;
    Py_XDECREF(number);
    return failed ? -1 : 0;
}

/* The atom (labels, op, value) (references stolen; op and value may be Py_None) emitted: its
 * number, the first of an equal one's (plan_of's setdefault). */
static int emit_atom(Reader *r, PyObject *labels, PyObject *op, PyObject *value)
{
    if (labels == NULL || op == NULL || value == NULL) {
        Py_XDECREF(labels), Py_XDECREF(op), Py_XDECREF(value);
        return -1;
    }
    PyObject *atom = PyTuple_Pack(3, labels, op, value);
    Py_DECREF(labels), Py_DECREF(op), Py_DECREF(value);
    if (atom == NULL)
        return -1;
    Py_ssize_t count = PyList_GET_SIZE(r->atoms), k = 0;
    for (; k < count; k++) {
        int equal = PyObject_RichCompareBool(PyList_GET_ITEM(r->atoms, k), atom, Py_EQ);
        if (equal < 0) {
            Py_DECREF(atom);
            return -1;
        }
        if (equal)
            break;
    }
    int failed = k == count && PyList_Append(r->atoms, atom) < 0;
    Py_DECREF(atom);
    return failed ? -1 : emit(r, (long)k);
}

/* A step's label read at the next token — an element's name, @name or text() (*last set for
 * the two that can only end a path) — appended to `labels`; -1 for any other step. */
static int read_step(Reader *r, PyObject *labels, int *last)
{
    const Token *t = token(r, 0);
    PyObject *label = NULL;
    *last = 0;
    if (word_is(r, 0, "@")) {
        const Token *name = token(r, 1);
        if (name->kind != K_NAME)
            return not_form(r); /* @*, or not a name */
        PyObject *bare = PyUnicode_Substring(r->text, name->start, name->end);
        label = bare == NULL ? NULL : PyUnicode_FromFormat("@%U", bare);
        Py_XDECREF(bare);
        r->at += 2, *last = 1;
    } else if (t->kind == K_NAME && word_is(r, 0, "text") && word_is(r, 1, "(")) {
        if (!word_is(r, 2, ")"))
            return not_form(r);
        label = PyUnicode_FromString("#text");
        r->at += 3, *last = 1;
    } else if (t->kind == K_NAME && !word_is(r, 1, "(")) {
        label = PyUnicode_Substring(r->text, t->start, t->end);
        r->at += 1;
    } else {
        return not_form(r); /* *, ., .., a function */
    }
    int failed = label == NULL || PyList_Append(labels, label) < 0;
    Py_XDECREF(label);
    return failed ? -1 : 0;
}

/* A relative path of names as its labels (a new tuple; `.` alone: ()), or NULL. */
static PyObject *read_relative(Reader *r)
{
    if (word_is(r, 0, ".")) {
        r->at++;
        if (word_is(r, 0, "/") || word_is(r, 0, "//") || word_is(r, 0, "["))
            return not_form(r), NULL;
        return PyTuple_New(0);
    }
    PyObject *labels = PyList_New(0);
    if (labels == NULL)
        return NULL;
    for (;;) {
        int last;
        if (read_step(r, labels, &last) < 0 || word_is(r, 0, "[") || word_is(r, 0, "//") ||
            (last && word_is(r, 0, "/"))) {
            if (!PyErr_Occurred())
                not_form(r);
            Py_DECREF(labels);
            return NULL;
        }
        if (!word_is(r, 0, "/"))
            break;
        r->at++;
    }
    Py_SETREF(labels, PyList_AsTuple(labels));
    return labels;
}

static int read_expr(Reader *r);

static int read_unary(Reader *r)
{
    const Token *t = token(r, 0);
    int function = t->kind == K_NAME && word_is(r, 1, "(");
    if (function && word_is(r, 0, "not")) {
        r->at += 2;
        if (read_expr(r) < 0 || expect(r, ")") < 0)
            return -1;
        return emit(r, F_NOT);
    }
    if (function && (word_is(r, 0, "starts-with") || word_is(r, 0, "contains"))) {
        PyObject *op = PyUnicode_Substring(r->text, t->start, t->end);
        r->at += 2;
        PyObject *labels = op == NULL ? NULL : read_relative(r);
        if (labels == NULL || expect(r, ",") < 0 || token(r, 0)->kind != K_STRING) {
            Py_XDECREF(op), Py_XDECREF(labels);
            return r->not_form || PyErr_Occurred() ? -1 : not_form(r);
        }
        const Token *value = token(r, 0);
        r->at++;
        if (expect(r, ")") < 0) {
            Py_DECREF(op), Py_DECREF(labels);
            return -1;
        }
        return emit_atom(r, labels, op, PyUnicode_Substring(r->text, value->start + 1, value->end - 1));
    }
    if (function && !word_is(r, 0, "text"))
        return not_form(r); /* true(), false(), what the language has not */
    if (word_is(r, 0, "(")) {
        r->at++;
        if (read_expr(r) < 0)
            return -1;
        return expect(r, ")");
    }
    if (word_is(r, 0, "/") || word_is(r, 0, "//"))
        return not_form(r); /* absolute inside a predicate: the parser's error */
    PyObject *labels = read_relative(r);
    if (labels == NULL)
        return -1;
    const Token *op = token(r, 0), *value = token(r, 1);
    int compared = op->kind == K_OP && (word_is(r, 0, "=") || word_is(r, 0, "!=") ||
                                        word_is(r, 0, "<") || word_is(r, 0, "<=") ||
                                        word_is(r, 0, ">") || word_is(r, 0, ">="));
    if (!compared) {
        if (PyTuple_GET_SIZE(labels) == 0) { /* `.` alone: true (the rewrite folds it) */
            Py_DECREF(labels);
            return not_form(r);
        }
        return emit_atom(r, labels, Py_NewRef(Py_None), Py_NewRef(Py_None));
    }
    PyObject *constant = NULL;
    if (value->kind == K_NUMBER) {
        PyObject *digits = PyUnicode_Substring(r->text, value->start, value->end);
        constant = digits == NULL ? NULL : PyFloat_FromString(digits);
        Py_XDECREF(digits);
    } else if (value->kind == K_STRING) {
        constant = PyUnicode_Substring(r->text, value->start + 1, value->end - 1);
    } else {
        Py_DECREF(labels);
        return not_form(r);
    }
    r->at += 2;
    return emit_atom(r, labels, PyUnicode_Substring(r->text, op->start, op->end), constant);
}

/* Items read by `item` joined by `word`, each join emitted as `op` (left to right: the
 * parser's and/or). */
static int read_joined(Reader *r, int (*item)(Reader *), const char *word, long op)
{
    if (item(r) < 0)
        return -1;
    while (word_is(r, 0, word)) {
        r->at++;
        if (item(r) < 0 || emit(r, op) < 0)
            return -1;
    }
    return 0;
}

static int read_conjunction(Reader *r)
{
    return read_joined(r, read_unary, "and", F_AND);
}

static int read_expr(Reader *r)
{
    return read_joined(r, read_conjunction, "or", F_OR);
}

/* The plan's head (a new tuple), its atoms and formula in the reader; NULL (not_form or an
 * error). */
static PyObject *read_filter(Reader *r)
{
    PyObject *labels = PyList_New(0), *head = NULL, *rest = NULL;
    Py_ssize_t anchor = -1, element = -1, predicates = 0;
    if (labels == NULL)
        return NULL;
    if (expect(r, "/") < 0)
        goto done;
    for (;;) {
        int last;
        if (read_step(r, labels, &last) < 0)
            goto done;
        Py_ssize_t step = PyList_GET_SIZE(labels) - 1;
        if (!last)
            element = step;
        for (; word_is(r, 0, "["); predicates++) {
            if (last || (anchor >= 0 && anchor != step)) { /* predicates on two steps */
                not_form(r);
                goto done;
            }
            anchor = step;
            r->at++;
            if (read_expr(r) < 0 || expect(r, "]") < 0 || (predicates && emit(r, F_AND) < 0))
                goto done;
        }
        if (token(r, 0)->kind == K_END)
            break;
        if (last || expect(r, "/") < 0) { /* `//`, more after the filter, @a/b */
            not_form(r);
            goto done;
        }
    }
    if (anchor < 0)
        anchor = element; /* no predicate: the last element */
    if (anchor < 0) {
        not_form(r);
        goto done;
    }
    Py_ssize_t steps = PyList_GET_SIZE(labels);
    head = PyList_GetSlice(labels, 0, anchor + 1);
    rest = PyList_GetSlice(labels, anchor + 1, steps);
    if (head == NULL || rest == NULL)
        goto done;
    Py_SETREF(head, PyList_AsTuple(head));
    if (head == NULL)
        goto done;
    if (steps > anchor + 1) { /* /a[p]/b is /a[p and b] */
        if (emit_atom(r, PyList_AsTuple(rest), Py_NewRef(Py_None), Py_NewRef(Py_None)) < 0 ||
            (predicates && emit(r, F_AND) < 0))
            Py_CLEAR(head);
    } else if (!predicates && emit(r, F_TRUE) < 0) {
        Py_CLEAR(head);
    }
done:
    Py_DECREF(labels);
    Py_XDECREF(rest);
    return head;
}

/* filter_tokens(text, token) -> the tokens of a filter (parser.tokenize's: instances of
 * `token`, a NamedTuple (kind, value, start, end), then an end token), or None where a
 * character starts no token (the parser's tokenizer says which). */
PyObject *filter_tokens(PyObject *module, PyObject *args)
{
    static const char *names[] = {"end", "number", "string", "op", "name"};
    static PyObject *kinds[5];
    PyObject *text, *result = NULL;
    PyTypeObject *cls;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!:filter_tokens", &text, &PyType_Type, &cls))
        return NULL;
    if (!PyType_IsSubtype(cls, &PyTuple_Type) || cls->tp_basicsize != PyTuple_Type.tp_basicsize ||
        cls->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "filter_tokens: a tuple type with no fields of its own");
        return NULL;
    }
    for (int k = 0; k < 5; k++)
        if (kinds[k] == NULL && (kinds[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return NULL;
    Reader reader = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), NULL, 0, 0, NULL, NULL, 0, 1};
    Reader *r = &reader;
    if (tokenize(r, PyUnicode_GET_LENGTH(text)) < 0) {
        PyMem_Free(r->tokens);
        return r->not_form && !PyErr_Occurred() ? Py_NewRef(Py_None) : NULL;
    }
    if ((result = PyList_New(r->count + 1)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i <= r->count; i++) {
        const Token *t = &r->tokens[i];
        PyObject *value = PyUnicode_Substring(text, t->start, t->end),
                 *start = PyLong_FromSsize_t(t->start), *end = PyLong_FromSsize_t(t->end),
                 *token = value && start && end ? cls->tp_alloc(cls, 4) : NULL;
        if (token == NULL || value == NULL || start == NULL || end == NULL) {
            Py_XDECREF(token), Py_XDECREF(value), Py_XDECREF(start), Py_XDECREF(end);
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(token, 0, Py_NewRef(kinds[t->kind]));
        PyTuple_SET_ITEM(token, 1, value);
        PyTuple_SET_ITEM(token, 2, start);
        PyTuple_SET_ITEM(token, 3, end);
        PyList_SET_ITEM(result, i, token);
    }
done:
    PyMem_Free(r->tokens);
    return result;
}

/* read_plan(text) -> (head, atoms, formula) of a filter of the counted form, else None. */
PyObject *read_plan(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "read_plan: a str");
        return NULL;
    }
    Reader reader = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), NULL, 0, 0,
                     PyList_New(0), PyList_New(0), 0};
    Reader *r = &reader;
    PyObject *head = NULL, *result = NULL;
    if (r->atoms != NULL && r->code != NULL && tokenize(r, PyUnicode_GET_LENGTH(text)) == 0)
        head = read_filter(r);
    if (head != NULL) {
        PyObject *atoms = PyList_AsTuple(r->atoms), *code = PyList_AsTuple(r->code);
        if (atoms != NULL && code != NULL)
            result = PyTuple_Pack(3, head, atoms, code);
        Py_XDECREF(atoms), Py_XDECREF(code);
    } else if (r->not_form && !PyErr_Occurred()) {
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(head);
    Py_XDECREF(r->atoms);
    Py_XDECREF(r->code);
    PyMem_Free(r->tokens);
    return result;
}

/* The compiled XML tokenizer: the hot loop of the XML event source.
 *
 * scan() turns the bytes of one document into the event columns of
 * xcep.events.model.EventBuilder (the same events the expat callbacks of
 * xml_source.py produce), for the common case only: UTF-8, ASCII names,
 * elements, attributes, text with the predefined and character references,
 * CDATA sections, comments and processing instructions, and a prolog made of
 * an XML declaration and a DOCTYPE without an internal subset. It stops when
 * the root element closes (DONE): what follows is xml_source.py's business.  It never
 * decides that a document is malformed: at anything it does not handle, or
 * that may be an error, it stops *before* it and says so (HANDOVER), and
 * xml_source.py lets expat parse the rest of the document from there (after a
 * prefix that reopens the elements still open), so every error is expat's.
 * Like a lazy DFA with its slow path, the fast part only has to be right on
 * what it accepts; the property tests compare both paths on random input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* what scan() returns */
enum { MORE = 0, DONE = 1, HANDOVER = 2, PROLOG = 3, LIMIT = 4 };
/* where a document's parse is */
enum { IN_PROLOG = 0, IN_BODY = 1 };
/* event kinds (xcep.events.model.Kind) */
enum { K_OPEN = 0, K_ATTR = 1, K_TEXT = 2, K_CLOSE = 3 };
/* results of the small parsers below */
enum { OK = 0, CUT = 1, BAD = 2, TOO_MANY = 3, FAIL = -1 };

#define MAX_ATTRIBUTES 64

static unsigned char CLASS[256];
#define C_START 1 /* may start a name */
#define C_NAME 2  /* may continue a name */
#define C_SPACE 4 /* XML white space */
#define C_PLAIN 8 /* a byte needing no attention in attribute values (and in text) */
#define C_TEXT 16 /* a byte needing no attention in text */


/* A growable byte buffer: a column of fixed-size items (flushed into an
 * array.array), or the scratch space of decoded text. */
typedef struct {
    char *data;
    Py_ssize_t used, capacity; /* in bytes */
} Column;

/* An open element on the stack (a bytearray of these, kept by the caller). */
typedef struct {
    long long node;
    long long name;
} Open;

typedef struct {
    const unsigned char *buf, *end;
    int final;
    Column kinds, names, depths, nodes; /* uint8, int32, int32, int64 */
    Py_ssize_t count;                   /* events written */
    PyObject *values;                   /* the values column: a list */
    long long doc;
    PyObject *symbols, *names_list, *stack, *parts; /* names_list: symbols.names */
    long long next_node;
    int keep_whitespace;
    int namespaces; /* report xmlns and xmlns:p as attributes */
    long max_depth;
    long max_attributes;
    Column scratch;
} Scan;

/* Recently seen names and their ids (names are interned per stream: the
 * cache belongs to one Symbols table, held so that its address stays its own). */
#define CACHE_SLOTS 1024
#define CACHED_LENGTH 40
typedef struct {
    Py_ssize_t length;
    long long id;
    unsigned char bytes[CACHED_LENGTH];
} CachedName;
static CachedName CACHE[CACHE_SLOTS];
static PyObject *CACHE_OWNER;

static void init_classes(void)
{
    for (int c = 0; c < 256; c++) {
        int k = 0;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':')
            k |= C_START | C_NAME;
        if ((c >= '0' && c <= '9') || c == '.' || c == '-')
            k |= C_NAME;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            k |= C_SPACE;
        if (c >= 0x20 && c < 0x80 && c != '<' && c != '&' && c != ']' && c != '"' && c != '\'')
            k |= C_PLAIN;
        if ((k & C_PLAIN) || c == '"' || c == '\'' || c == '\n' || c == '\t')
            k |= C_TEXT;
        CLASS[c] = (unsigned char)k;
    }
}

static int column_put(Column *c, const void *item, Py_ssize_t size)
{
    if (size == 0)
        return OK;
    if (c->used + size > c->capacity) {
        Py_ssize_t capacity = (c->used + size) * 2 + 4096;
        char *grown = PyMem_Realloc(c->data, capacity);
        if (grown == NULL) {
            PyErr_NoMemory();
            return FAIL;
        }
        c->data = grown;
        c->capacity = capacity;
    }
    memcpy(c->data + c->used, item, size);
    c->used += size;
    return OK;
}

/* the scratch buffer: decoded text and attribute values before they become str */
static int put(Scan *s, const void *data, Py_ssize_t n)
{
    return column_put(&s->scratch, data, n);
}

static int put_utf8(Scan *s, unsigned long c)
{
    unsigned char b[4];
    int n;
    if (c < 0x80) {
        b[0] = (unsigned char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = 0xC0 | (c >> 6);
        b[1] = 0x80 | (c & 0x3F);
        n = 2;
    } else if (c < 0x10000) {
        b[0] = 0xE0 | (c >> 12);
        b[1] = 0x80 | ((c >> 6) & 0x3F);
        b[2] = 0x80 | (c & 0x3F);
        n = 3;
    } else {
        b[0] = 0xF0 | (c >> 18);
        b[1] = 0x80 | ((c >> 12) & 0x3F);
        b[2] = 0x80 | ((c >> 6) & 0x3F);
        b[3] = 0x80 | (c & 0x3F);
        n = 4;
    }
    return put(s, b, n);
}

/* The length of the valid XML character encoded in UTF-8 at p (p[0] >= 0x80):
 * 0 if it is not one, -1 if the buffer ends inside it. */
static int utf8_char(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    int n;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c == 0xE0) {
        n = 3;
        lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
        n = 3;
    else if (c == 0xED) {
        n = 3;
        hi = 0x9F; /* no surrogates */
    } else if (c == 0xF0) {
        n = 4;
        lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3)
        n = 4;
    else if (c == 0xF4) {
        n = 4;
        hi = 0x8F;
    } else
        return 0;
    if (end - p < n)
        return -1;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    if (c == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF))
        return 0; /* U+FFFE and U+FFFF are not XML characters */
    return n;
}

static int is_xml_char(unsigned long c)
{
    return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
           (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

/* The reference at p (p[0] == '&'), decoded into the scratch buffer.
 * Returns its length, or 0 when it is not a predefined or character reference
 * (BAD), or -1 when the buffer ends inside it. */
static Py_ssize_t reference(Scan *s, const unsigned char *p)
{
    const unsigned char *q = p + 1, *limit = p + 12;
    while (q < s->end && q < limit && *q != ';')
        q++;
    if (q == s->end)
        return -1;
    if (*q != ';')
        return 0;
    Py_ssize_t n = q - (p + 1);
    const char *body = (const char *)p + 1;
    char c = 0;
    if (n == 2 && memcmp(body, "lt", 2) == 0)
        c = '<';
    else if (n == 2 && memcmp(body, "gt", 2) == 0)
        c = '>';
    else if (n == 3 && memcmp(body, "amp", 3) == 0)
        c = '&';
    else if (n == 4 && memcmp(body, "apos", 4) == 0)
        c = '\'';
    else if (n == 4 && memcmp(body, "quot", 4) == 0)
        c = '"';
    if (c) {
        if (put(s, &c, 1) < 0)
            return FAIL - 1; /* never a length: the caller checks PyErr_Occurred */
        return n + 2;
    }
    if (n < 2 || body[0] != '#')
        return 0;
    unsigned long value = 0;
    const char *d = body + 1, *stop = body + n;
    int hex = *d == 'x';
    if (hex)
        d++;
    if (d == stop)
        return 0;
    for (; d < stop; d++) {
        int digit;
        if (*d >= '0' && *d <= '9')
            digit = *d - '0';
        else if (hex && *d >= 'a' && *d <= 'f')
            digit = *d - 'a' + 10;
        else if (hex && *d >= 'A' && *d <= 'F')
            digit = *d - 'A' + 10;
        else
            return 0;
        value = value * (hex ? 16 : 10) + digit;
        if (value > 0x10FFFF)
            return 0;
    }
    if (!is_xml_char(value))
        return 0;
    if (put_utf8(s, value) < 0)
        return FAIL - 1;
    return n + 2;
}

/* ---- output ---- */

static int append_new(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return FAIL;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

static int emit(Scan *s, int kind, long long name, PyObject *value, Py_ssize_t depth,
                long long node)
{
    unsigned char k = (unsigned char)kind;
    int n = (int)name, d = (int)depth;
    if (column_put(&s->kinds, &k, 1) < 0 || column_put(&s->names, &n, 4) < 0 ||
        column_put(&s->depths, &d, 4) < 0 || column_put(&s->nodes, &node, 8) < 0 ||
        PyList_Append(s->values, value) < 0)
        return FAIL;
    s->count++;
    return OK;
}

/* Append what was written to the caller's array columns (all of them, so
 * they stay as long as the values list even when an exception is pending). */
static int flush_columns(Scan *s, PyObject *columns)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    int status = OK;
    Column docs = {NULL, 0, 0};
    for (Py_ssize_t i = 0; i < s->count && status == OK; i++)
        status = column_put(&docs, &s->doc, 8);
    Column *parts[5] = {&docs, &s->kinds, &s->names, &s->depths, &s->nodes};
    int index[5] = {0, 1, 2, 4, 5}, size[5] = {8, 1, 4, 4, 8};
    for (int i = 0; i < 5 && status == OK; i++) {
        /* count items: an event whose writing failed half-way is not one */
        PyObject *r = PyObject_CallMethod(PyTuple_GET_ITEM(columns, index[i]), "frombytes", "y#",
                                          parts[i]->data ? parts[i]->data : "",
                                          s->count * size[i]);
        if (r == NULL)
            status = FAIL;
        Py_XDECREF(r);
    }
    PyMem_Free(docs.data);
    if (type != NULL) {
        PyErr_Restore(type, value, traceback);
        return FAIL;
    }
    return status;
}

static unsigned hash_name(const unsigned char *p, Py_ssize_t n)
{
    unsigned h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* symbols[name]: the interned id of a str (Symbols.__missing__ adds a new one); -1 with an
 * error set on failure. */
static long long symbol_id(PyObject *symbols, PyObject *name)
{
    PyObject *id = PyDict_GetItemWithError(symbols, name);
    if (id != NULL)
        Py_INCREF(id);
    else if (!PyErr_Occurred())
        id = PyObject_GetItem(symbols, name);
    if (id == NULL)
        return -1;
    long long value = PyLong_AsLongLong(id);
    Py_DECREF(id);
    return value;
}

/* The interned id of the ASCII name at p (symbols[name], adding it when new). */
static long long name_id(Scan *s, const unsigned char *p, Py_ssize_t n)
{
    if (CACHE_OWNER != s->symbols) {
        memset(CACHE, 0, sizeof CACHE);
        Py_XDECREF(CACHE_OWNER);
        Py_INCREF(s->symbols);
        CACHE_OWNER = s->symbols;
    }
    CachedName *slot = &CACHE[hash_name(p, n) % CACHE_SLOTS];
    if (slot->length == n && memcmp(slot->bytes, p, n) == 0)
        return slot->id;
    PyObject *name = PyUnicode_FromStringAndSize((const char *)p, n);
    if (name == NULL)
        return -1;
    long long value = symbol_id(s->symbols, name);
    Py_DECREF(name);
    if (value < 0)
        return -1;
    /* the calls above may have run Python code, and another thread a scan of
     * another stream: cache the name only if the cache is still this stream's */
    if (n <= CACHED_LENGTH && CACHE_OWNER == s->symbols) {
        slot->length = n;
        slot->id = value;
        memcpy(slot->bytes, p, n);
    }
    return value;
}

static Py_ssize_t depth_of(Scan *s)
{
    return PyByteArray_GET_SIZE(s->stack) / (Py_ssize_t)sizeof(Open);
}

static Open *top_of(Scan *s)
{
    return (Open *)PyByteArray_AS_STRING(s->stack) + depth_of(s) - 1;
}

/* The text collected since the last tag, as one text event (unless it is
 * white space only and white space is not kept). */
static int flush_text(Scan *s)
{
    Py_ssize_t n = PyList_GET_SIZE(s->parts);
    if (n == 0)
        return OK;
    PyObject *value;
    if (n == 1) {
        value = PyList_GET_ITEM(s->parts, 0);
        Py_INCREF(value);
    } else {
        PyObject *empty = PyUnicode_FromStringAndSize("", 0);
        if (empty == NULL)
            return FAIL;
        value = PyUnicode_Join(empty, s->parts);
        Py_DECREF(empty);
        if (value == NULL)
            return FAIL;
    }
    if (PyList_SetSlice(s->parts, 0, n, NULL) < 0) {
        Py_DECREF(value);
        return FAIL;
    }
    int keep = s->keep_whitespace;
    if (!keep) { /* str.isspace(), as the expat path decides */
        Py_ssize_t length = PyUnicode_GET_LENGTH(value);
        int kind = PyUnicode_KIND(value);
        const void *data = PyUnicode_DATA(value);
        for (Py_ssize_t i = 0; i < length && !keep; i++)
            keep = !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i));
        keep = keep || length == 0;
    }
    int r = OK;
    if (keep)
        r = emit(s, K_TEXT, -1, value, depth_of(s) + 1, s->next_node++);
    Py_DECREF(value);
    return r;
}

/* ---- the small parsers: each returns OK (and moves *pp past what it read),
 * CUT (the buffer ends inside), BAD (expat decides) or FAIL (exception) ---- */

static const unsigned char *skip_space(const unsigned char *p, const unsigned char *end)
{
    while (p < end && (CLASS[*p] & C_SPACE))
        p++;
    return p;
}

/* An ASCII name at *pp. */
static int name(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp;
    if (p == s->end)
        return CUT;
    if (!(CLASS[*p] & C_START))
        return BAD;
    while (++p < s->end && (CLASS[*p] & C_NAME))
        ;
    if (p == s->end)
        return CUT;
    if (*p >= 0x80)
        return BAD; /* a non-ASCII name: expat knows its character classes */
    *pp = p;
    return OK;
}

static int cut_or_bad(Scan *s)
{
    return s->final ? BAD : CUT;
}

/* Character data at *pp up to the next '<', appended to s->parts as one str.
 * On CUT, what could be decoded is appended and *pp moved past it. */
static int text(Scan *s, const unsigned char **pp)
{
    const unsigned char *start = *pp, *p = start, *span = start, *end = s->end;
    int status = OK, copied = 0;
    s->scratch.used = 0;
    while (p < end) {
        unsigned c = *p;
        if (CLASS[c] & C_TEXT) {
            p++;
            continue;
        }
        if (c == '<')
            break;
        if (c == '&' || c == '\r') {
            if (put(s, span, p - span) < 0)
                return FAIL;
            copied = 1;
            span = p;
            if (c == '\r') {
                if (p + 1 == end && !s->final) {
                    status = CUT;
                    break;
                }
                if (put(s, "\n", 1) < 0)
                    return FAIL;
                p += (p + 1 < end && p[1] == '\n') ? 2 : 1;
            } else {
                Py_ssize_t n = reference(s, p);
                if (n <= 0) {
                    if (PyErr_Occurred())
                        return FAIL;
                    status = n == 0 ? BAD : cut_or_bad(s);
                    break;
                }
                p += n;
            }
            span = p;
            continue;
        }
        if (c == ']') {
            if (end - p < 3 && !s->final) {
                status = CUT;
                break;
            }
            if (end - p >= 3 && p[1] == ']' && p[2] == '>') {
                status = BAD; /* "]]>" is not allowed in content */
                break;
            }
            p++;
            continue;
        }
        if (c >= 0x80) {
            int n = utf8_char(p, end);
            if (n > 0) {
                p += n;
                continue;
            }
            status = n == 0 ? BAD : cut_or_bad(s);
            break;
        }
        status = BAD; /* a control character */
        break;
    }
    if (p == end && status == OK)
        status = cut_or_bad(s);
    if (p > start) {
        PyObject *part;
        if (copied) {
            if (put(s, span, p - span) < 0)
                return FAIL;
            part = PyUnicode_DecodeUTF8(s->scratch.data, s->scratch.used, NULL);
        } else
            part = PyUnicode_DecodeUTF8((const char *)start, p - start, NULL);
        if (append_new(s->parts, part) < 0)
            return FAIL;
    }
    *pp = p;
    return status;
}

/* The quote character opening a literal at *pp; *pp moves past it. */
static int opening_quote(Scan *s, const unsigned char **pp, unsigned *quote)
{
    if (*pp == s->end)
        return CUT;
    *quote = **pp;
    if (*quote != '"' && *quote != '\'')
        return BAD;
    (*pp)++;
    return OK;
}

/* A quoted attribute value at *pp, normalized as expat does (each literal
 * white space character is a space, CR LF is one), as a new str in *value. */
static int attribute_value(Scan *s, const unsigned char **pp, PyObject **value)
{
    const unsigned char *p = *pp, *end = s->end;
    unsigned quote;
    int status = opening_quote(s, &p, &quote);
    if (status != OK)
        return status;
    const unsigned char *start = p, *span = p;
    int copied = 0;
    s->scratch.used = 0;
    for (;;) {
        if (p == end)
            return CUT;
        unsigned c = *p;
        if (CLASS[c] & C_PLAIN) {
            p++;
            continue;
        }
        if (c == quote)
            break;
        if (c == '"' || c == '\'' || c == ']') {
            p++;
            continue;
        }
        if (c == '<')
            return BAD;
        if (c == '&' || c == '\t' || c == '\n' || c == '\r') {
            if (put(s, span, p - span) < 0)
                return FAIL;
            copied = 1;
            if (c == '&') {
                Py_ssize_t n = reference(s, p);
                if (n <= 0)
                    return PyErr_Occurred() ? FAIL : (n == 0 ? BAD : CUT);
                p += n;
            } else {
                if (c == '\r' && p + 1 == end)
                    return CUT;
                if (put(s, " ", 1) < 0)
                    return FAIL;
                p += (c == '\r' && p[1] == '\n') ? 2 : 1;
            }
            span = p;
            continue;
        }
        if (c >= 0x80) {
            int n = utf8_char(p, end);
            if (n <= 0)
                return n == 0 ? BAD : CUT;
            p += n;
            continue;
        }
        return BAD; /* a control character */
    }
    if (copied) {
        if (put(s, span, p - span) < 0)
            return FAIL;
        *value = PyUnicode_DecodeUTF8(s->scratch.data, s->scratch.used, NULL);
    } else
        *value = PyUnicode_DecodeUTF8((const char *)start, p - start, NULL);
    if (*value == NULL)
        return FAIL;
    *pp = p + 1;
    return OK;
}

typedef struct {
    const unsigned char *name;
    Py_ssize_t length;
    PyObject *value;
} Attribute;

static int is_namespace_declaration(const Attribute *a)
{
    return a->length >= 5 && memcmp(a->name, "xmlns", 5) == 0 &&
           (a->length == 5 || a->name[5] == ':');
}

/* The attributes of a start tag from p on (after MAX_ATTRIBUTES of them), counted
 * without reading them: TOO_MANY past the limit (the document is refused before its
 * attributes take any memory), CUT when the tag is not all here, else BAD (expat reads
 * the tag and decides). */
static int count_attributes(Scan *s, const unsigned char *p, long count)
{
    const unsigned char *end = s->end;
    for (;;) {
        p = skip_space(p, end);
        if (p == end)
            return CUT;
        if (*p == '>' || *p == '/')
            return BAD;
        const unsigned char *equals = memchr(p, '=', (size_t)(end - p));
        if (equals == NULL)
            return CUT;
        p = skip_space(equals + 1, end);
        if (p == end)
            return CUT;
        if (*p != '"' && *p != '\'')
            return BAD;
        const unsigned char *close = memchr(p + 1, *p, (size_t)(end - p - 1));
        if (close == NULL)
            return CUT;
        p = close + 1;
        if (++count > s->max_attributes)
            return TOO_MANY;
    }
}

/* A start tag at *pp (p[0] == '<'): its events (after the text before it). */
static int start_tag(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp + 1, *end = s->end, *tag_name = p;
    Attribute attributes[MAX_ATTRIBUTES];
    int count = 0, status, empty = 0;
    status = name(s, &p);
    if (status != OK)
        return status;
    Py_ssize_t tag_length = p - tag_name;
    for (;;) {
        const unsigned char *after = skip_space(p, end);
        if (after == end) {
            status = CUT;
            goto done;
        }
        if (*after == '>') {
            p = after + 1;
            break;
        }
        if (*after == '/') {
            if (after + 1 == end) {
                status = CUT;
                goto done;
            }
            if (after[1] != '>') {
                status = BAD;
                goto done;
            }
            p = after + 2;
            empty = 1;
            break;
        }
        if (count == MAX_ATTRIBUTES && after != p) {
            status = count_attributes(s, after, count);
            goto done;
        }
        if (after == p) { /* attributes need space before them */
            status = BAD;
            goto done;
        }
        p = after;
        Attribute *a = &attributes[count];
        a->name = p;
        status = name(s, &p);
        if (status != OK)
            goto done;
        a->length = p - a->name;
        p = skip_space(p, end);
        if (p == end) {
            status = CUT;
            goto done;
        }
        if (*p != '=') {
            status = BAD;
            goto done;
        }
        p = skip_space(p + 1, end);
        status = attribute_value(s, &p, &a->value);
        if (status != OK)
            goto done;
        for (int i = 0; i < count; i++)
            if (attributes[i].length == a->length &&
                memcmp(attributes[i].name, a->name, a->length) == 0) {
                Py_DECREF(a->value);
                status = BAD; /* a duplicate attribute */
                goto done;
            }
        if (++count > s->max_attributes) {
            status = TOO_MANY;
            goto done;
        }
    }
    Py_ssize_t depth = depth_of(s) + 1;
    if (depth > s->max_depth) {
        status = BAD; /* expat's path reports the limit */
        goto done;
    }
    status = FAIL;
    if (flush_text(s) < 0)
        goto done;
    Open open = {s->next_node++, name_id(s, tag_name, tag_length)};
    if (open.name < 0 || emit(s, K_OPEN, open.name, Py_None, depth, open.node) < 0)
        goto done;
    for (int i = 0; i < count; i++) {
        if (!s->namespaces && is_namespace_declaration(&attributes[i]))
            continue;
        long long id = name_id(s, attributes[i].name, attributes[i].length);
        if (id < 0 || emit(s, K_ATTR, id, attributes[i].value, depth + 1, s->next_node++) < 0)
            goto done;
    }
    if (empty) {
        if (emit(s, K_CLOSE, open.name, Py_None, depth, open.node) < 0)
            goto done;
    } else {
        Py_ssize_t size = PyByteArray_GET_SIZE(s->stack);
        if (PyByteArray_Resize(s->stack, size + sizeof(Open)) < 0)
            goto done;
        memcpy(PyByteArray_AS_STRING(s->stack) + size, &open, sizeof(Open));
    }
    status = OK;
    *pp = p;
done:
    for (int i = 0; i < count; i++)
        Py_DECREF(attributes[i].value);
    return status;
}

/* An end tag at *pp (p[0..1] == "</"), closing the innermost open element. */
static int end_tag(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp + 2, *tag_name = p, *end = s->end;
    int status = name(s, &p);
    if (status != OK)
        return status;
    Py_ssize_t length = p - tag_name;
    p = skip_space(p, end);
    if (p == end)
        return CUT;
    if (*p != '>')
        return BAD;
    Py_ssize_t depth = depth_of(s);
    Open open = *top_of(s);
    PyObject *open_name = PyList_GET_ITEM(s->names_list, open.name);
    if (!PyUnicode_IS_COMPACT_ASCII(open_name) || PyUnicode_GET_LENGTH(open_name) != length ||
        memcmp(PyUnicode_1BYTE_DATA(open_name), tag_name, length) != 0)
        return BAD; /* a mismatched tag */
    if (flush_text(s) < 0 || emit(s, K_CLOSE, open.name, Py_None, depth, open.node) < 0)
        return FAIL;
    if (PyByteArray_Resize(s->stack, (depth - 1) * sizeof(Open)) < 0)
        return FAIL;
    *pp = p + 1;
    return OK;
}

/* Characters up to the terminator `stop` (checked to be XML characters);
 * *pp is moved past the terminator. */
static int chars_until(Scan *s, const unsigned char **pp, const char *stop)
{
    const unsigned char *p = *pp, *end = s->end;
    size_t n = strlen(stop);
    for (;;) {
        if ((size_t)(end - p) < n)
            return cut_or_bad(s);
        if (memcmp(p, stop, n) == 0)
            break;
        unsigned c = *p;
        if (c >= 0x80) {
            int k = utf8_char(p, end);
            if (k <= 0)
                return k == 0 ? BAD : cut_or_bad(s);
            p += k;
        } else if (c < 0x20 && !(CLASS[c] & C_SPACE))
            return BAD;
        else
            p++;
    }
    *pp = p + n;
    return OK;
}

/* A comment at *pp ("<!--"): skipped. "--" may only close it. */
static int comment(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp + 4;
    int status = chars_until(s, &p, "--");
    if (status != OK)
        return status;
    if (p == s->end)
        return cut_or_bad(s);
    if (*p != '>')
        return BAD;
    *pp = p + 1;
    return OK;
}

/* A processing instruction at *pp ("<?"): skipped. Targets like "xml" are left to expat. */
static int processing_instruction(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp + 2, *target = p;
    int status = name(s, &p);
    if (status != OK)
        return status;
    if (p - target == 3 && (target[0] | 0x20) == 'x' && (target[1] | 0x20) == 'm' &&
        (target[2] | 0x20) == 'l')
        return BAD;
    if (!(CLASS[*p] & C_SPACE)) {
        if (*p != '?')
            return BAD;
    }
    status = chars_until(s, &p, "?>");
    if (status != OK)
        return status;
    *pp = p;
    return OK;
}

/* A CDATA section at *pp ("<![CDATA["): its characters join the text. */
static int cdata(Scan *s, const unsigned char **pp)
{
    const unsigned char *start = *pp + 9, *p = start;
    int status = chars_until(s, &p, "]]>");
    if (status != OK)
        return status;
    /* line ends are normalized in CDATA too */
    const unsigned char *q = start, *stop = p - 3, *span = start;
    s->scratch.used = 0;
    for (; q < stop; q++) {
        if (*q == '\r') {
            if (put(s, span, q - span) < 0 || put(s, "\n", 1) < 0)
                return FAIL;
            if (q + 1 < stop && q[1] == '\n')
                q++;
            span = q + 1;
        }
    }
    if (put(s, span, stop - span) < 0)
        return FAIL;
    if (s->scratch.used && append_new(s->parts, PyUnicode_DecodeUTF8(s->scratch.data, s->scratch.used, NULL)) < 0)
        return FAIL;
    *pp = p;
    return OK;
}

static int starts(const unsigned char *p, const unsigned char *end, const char *text)
{
    size_t n = strlen(text);
    return (size_t)(end - p) >= n && memcmp(p, text, n) == 0;
}

/* "<!" at *pp: a comment or a CDATA section, or BAD; CUT when too short to tell. */
static int markup_declaration(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp, *end = s->end;
    if (starts(p, end, "<!--"))
        return comment(s, pp);
    if (starts(p, end, "<![CDATA["))
        return cdata(s, pp);
    size_t available = end - p;
    if ((available < 4 && memcmp(p, "<!--", available) == 0) ||
        (available < 9 && memcmp(p, "<![CDATA[", available) == 0))
        return cut_or_bad(s);
    return BAD;
}

/* ---- the prolog: BOM, XML declaration, DOCTYPE without internal subset ---- */

/* A quoted literal of name characters and the ASCII characters in `extra`,
 * its bytes in [*value, *value + *length). */
static int quoted(Scan *s, const unsigned char **pp, const char *extra,
                  const unsigned char **value, Py_ssize_t *length)
{
    const unsigned char *p = *pp, *end = s->end;
    unsigned quote;
    int status = opening_quote(s, &p, &quote);
    if (status != OK)
        return status;
    const unsigned char *start = p;
    for (; p < end && *p != quote; p++)
        if (!(CLASS[*p] & C_NAME) && (*p == 0 || strchr(extra, *p) == NULL))
            return BAD;
    if (p == end)
        return CUT;
    *value = start;
    *length = p - start;
    *pp = p + 1;
    return OK;
}

/* name="value" with the value's bytes in [*value, *value + *length). */
static int pseudo_attribute(Scan *s, const unsigned char **pp, const char *key,
                            const unsigned char **value, Py_ssize_t *length)
{
    const unsigned char *p = *pp, *end = s->end;
    size_t n = strlen(key);
    if ((size_t)(end - p) < n)
        return CUT;
    if (memcmp(p, key, n) != 0)
        return BAD;
    p = skip_space(p + n, end);
    if (p == end)
        return CUT;
    if (*p != '=')
        return BAD;
    p = skip_space(p + 1, end);
    int status = quoted(s, &p, "", value, length);
    if (status == OK)
        *pp = p;
    return status;
}

static int same_ignoring_case(const unsigned char *p, Py_ssize_t n, const char *text)
{
    if ((size_t)n != strlen(text))
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != (unsigned char)(text[i] | 0x20))
            return 0;
    return 1;
}

static int xml_declaration(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp + 5, *end = s->end, *value;
    Py_ssize_t length;
    int status;
    const unsigned char *after = skip_space(p, end);
    if (after == p)
        return after == end ? CUT : BAD;
    p = after;
    status = pseudo_attribute(s, &p, "version", &value, &length);
    if (status != OK)
        return status;
    if (length != 3 || memcmp(value, "1.0", 3) != 0)
        return BAD;
    after = skip_space(p, end);
    if (after != p && after < end && *after == 'e') {
        p = after;
        status = pseudo_attribute(s, &p, "encoding", &value, &length);
        if (status != OK)
            return status;
        if (!same_ignoring_case(value, length, "utf-8"))
            return BAD; /* expat decodes other encodings */
        after = skip_space(p, end);
    }
    if (after != p && after < end && *after == 's') {
        p = after;
        status = pseudo_attribute(s, &p, "standalone", &value, &length);
        if (status != OK)
            return status;
        if (!(length == 3 && memcmp(value, "yes", 3) == 0) &&
            !(length == 2 && memcmp(value, "no", 2) == 0))
            return BAD;
        after = skip_space(p, end);
    }
    p = after;
    if (end - p < 2)
        return CUT;
    if (p[0] != '?' || p[1] != '>')
        return BAD;
    *pp = p + 2;
    return OK;
}

static int doctype(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp + 9, *end = s->end;
    const unsigned char *after = skip_space(p, end);
    if (after == p)
        return after == end ? CUT : BAD;
    p = after;
    int status = name(s, &p);
    if (status != OK)
        return status;
    after = skip_space(p, end);
    if (after != p && after < end && (*after == 'S' || *after == 'P')) {
        p = after;
        int public = starts(p, end, "PUBLIC");
        if (!public && !starts(p, end, "SYSTEM"))
            return end - p < 6 ? CUT : BAD;
        p += 6;
        for (int i = 0; i < (public ? 2 : 1); i++) {
            after = skip_space(p, end);
            if (after == p)
                return after == end ? CUT : BAD;
            p = after;
            const unsigned char *id;
            Py_ssize_t id_length;
            status = quoted(s, &p, " /()+,=?;!*#@$%", &id, &id_length); /* system, public id */
            if (status != OK)
                return status;
        }
        after = skip_space(p, end);
    }
    p = after;
    if (p == end)
        return CUT;
    if (*p != '>')
        return BAD; /* an internal subset: entities, so expat */
    *pp = p + 1;
    return OK;
}

/* Could the bytes at p (fewer than strlen(text)) still become text? */
static int may_become(const unsigned char *p, const unsigned char *end, const char *text)
{
    size_t n = end - p;
    return n < strlen(text) && memcmp(p, text, n) == 0;
}

static int prolog(Scan *s, const unsigned char **pp)
{
    const unsigned char *p = *pp, *end = s->end;
    int status;
    if (may_become(p, end, "\xEF\xBB\xBF"))
        return CUT;
    if (starts(p, end, "\xEF\xBB\xBF"))
        p += 3;
    if (may_become(p, end, "<?xml "))
        return CUT;
    if (starts(p, end, "<?xml") && (CLASS[p[5]] & C_SPACE)) {
        status = xml_declaration(s, &p);
        if (status != OK)
            return status;
    }
    p = skip_space(p, end);
    if (may_become(p, end, "<!DOCTYPE"))
        return CUT;
    if (starts(p, end, "<!DOCTYPE")) {
        status = doctype(s, &p);
        if (status != OK)
            return status;
        p = skip_space(p, end);
    }
    if (end - p < 2)
        return CUT;
    if (p[0] != '<' || !(CLASS[p[1]] & C_START))
        return BAD; /* comments, processing instructions: expat */
    *pp = p;
    return OK;
}

/* ---- scan() ---- */

static int body(Scan *s, const unsigned char **pp)
{
    const unsigned char *end = s->end;
    for (;;) {
        const unsigned char *p = *pp;
        int status;
        if (depth_of(s) == 0)
            return OK; /* the root closed */
        if (p == end)
            return cut_or_bad(s);
        if (*p != '<')
            status = text(s, pp);
        else if (end - p < 2)
            status = cut_or_bad(s);
        else if (p[1] == '/')
            status = end_tag(s, pp);
        else if (p[1] == '!')
            status = markup_declaration(s, pp);
        else if (p[1] == '?')
            status = processing_instruction(s, pp);
        else
            status = start_tag(s, pp);
        if (status == CUT && s->final)
            status = BAD;
        if (status != OK)
            return status;
    }
}

static PyObject *scan(PyObject *module, PyObject *args)
{
    Py_buffer buffer;
    Py_ssize_t pos;
    int final, phase;
    PyObject *columns;
    Scan s;
    (void)module;
    memset(&s, 0, sizeof s);
    if (!PyArg_ParseTuple(args, "y*npiLLO!O!O!O!pll|p:scan", &buffer, &pos, &final, &phase, &s.doc,
                          &s.next_node, &PyTuple_Type, &columns, &PyDict_Type, &s.symbols,
                          &PyByteArray_Type, &s.stack, &PyList_Type, &s.parts,
                          &s.keep_whitespace, &s.max_depth, &s.max_attributes, &s.namespaces))
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || pos > buffer.len) {
        PyErr_SetString(PyExc_ValueError, "position outside the buffer");
        goto out;
    }
    if (PyTuple_GET_SIZE(columns) != 6 || !PyList_Check(PyTuple_GET_ITEM(columns, 3))) {
        PyErr_SetString(PyExc_TypeError, "columns: docs, kinds, names, values (a list), depths, nodes");
        goto out;
    }
    s.values = PyTuple_GET_ITEM(columns, 3);
    s.names_list = PyObject_GetAttrString(s.symbols, "names");
    if (s.names_list == NULL)
        goto out;
    if (!PyList_Check(s.names_list)) {
        PyErr_SetString(PyExc_TypeError, "symbols.names must be a list");
        goto out;
    }
    s.buf = buffer.buf;
    s.end = s.buf + buffer.len;
    s.final = final;
    const unsigned char *p = s.buf + pos;
    Py_ssize_t root_at = -1;
    int status, answer;
    if (phase == IN_PROLOG) {
        const unsigned char *root = p;
        status = prolog(&s, &root);
        if (status == OK) {
            const unsigned char *q = root;
            status = start_tag(&s, &q);
            if (status == OK) {
                root_at = root - s.buf;
                p = q;
                phase = IN_BODY;
                if (depth_of(&s) == 0) { /* an empty root element */
                    answer = DONE;
                    goto answer;
                }
            }
        }
        if (status == FAIL)
            goto out;
        if (status == TOO_MANY) {
            p = root;
            answer = LIMIT;
            goto answer;
        }
        if (status != OK) {
            answer = status == CUT && !final ? MORE : PROLOG;
            goto answer;
        }
    }
    status = body(&s, &p);
    if (status == FAIL)
        goto out;
    answer = status == OK ? DONE : status == CUT ? MORE : status == TOO_MANY ? LIMIT : HANDOVER;
answer:
    result = Py_BuildValue("inLn", answer, (Py_ssize_t)(p - s.buf), s.next_node, root_at);
out:
    if (s.values != NULL && flush_columns(&s, columns) < 0)
        Py_CLEAR(result);
    Py_XDECREF(s.names_list);
    PyMem_Free(s.kinds.data);
    PyMem_Free(s.names.data);
    PyMem_Free(s.depths.data);
    PyMem_Free(s.nodes.data);
    PyMem_Free(s.scratch.data);
    PyBuffer_Release(&buffer);
    return result;
}

/* ---- JSON: a decoded value's events (xcep/events/json_source.py, emit_values) ----
 *
 * The walk of json_source.py in C (which stays as the reference: the property tests
 * compare the two): an element per member, per array item, the document's root; a text
 * per string, number, true and false; an array of 16 items or more handed back to
 * Python, whose records of a structure met before copy that structure's events. */

/* What the walk keeps per open container: its items, the next one, the name and depth
 * its items' elements get, and the open event to close after them (close < 0: none,
 * the items of an array held by a member, which has no element of its own). */
typedef struct {
    PyObject *seq; /* an _Object (list of (key, value) pairs) or a list, borrowed */
    Py_ssize_t next;
    int members;    /* an _Object: its items are members */
    long long item; /* the name id of a list's items */
    int depth;      /* their depth */
    long long close_name, close_node;
    int close_depth, close;
} JsonFrame;

typedef struct {
    Scan s;
    PyObject *object_type, *too_deep, *long_items, *columns, *true_text, *false_text;
    PyObject *item_name; /* the name of an array's items that no member holds, borrowed */
    long long item;      /* and its id */
    Py_ssize_t long_array;
    JsonFrame *frames;
    Py_ssize_t used, capacity;
} JsonWalk;

static int json_push(JsonWalk *w, JsonFrame frame)
{
    if (w->used == w->capacity) {
        Py_ssize_t capacity = w->capacity * 2 + 16;
        JsonFrame *grown = PyMem_Realloc(w->frames, capacity * sizeof *grown);
        if (grown == NULL) {
            PyErr_NoMemory();
            return FAIL;
        }
        w->frames = grown;
        w->capacity = capacity;
    }
    w->frames[w->used++] = frame;
    return OK;
}

/* A long array's items (16 or more) handed to Python (json_source._Items: records of a
 * structure met before are copied), after the events so far are in the columns. */
static int json_long_array(JsonWalk *w, PyObject *name, PyObject *items, int depth)
{
    if (flush_columns(&w->s, w->columns) < 0)
        return FAIL;
    w->s.kinds.used = w->s.names.used = w->s.depths.used = w->s.nodes.used = 0;
    w->s.count = 0;
    PyObject *r = PyObject_CallFunction(w->long_items, "OOiL", name, items, depth, w->s.next_node);
    if (r == NULL)
        return FAIL;
    w->s.next_node = PyLong_AsLongLong(r);
    Py_DECREF(r);
    return w->s.next_node < 0 && PyErr_Occurred() ? FAIL : OK;
}

/* The element `name` (an id) holding `value` at `depth`: its open event, then its text
 * and close, or a frame for its items. */
static int json_element(JsonWalk *w, long long name, PyObject *value, int depth)
{
    if (depth > w->s.max_depth) {
        PyErr_Format(w->too_deep, "nesting deeper than the limit of %ld elements", w->s.max_depth);
        return FAIL;
    }
    long long node = w->s.next_node++;
    if (emit(&w->s, K_OPEN, name, Py_None, depth, node) < 0)
        return FAIL;
    PyTypeObject *type = Py_TYPE(value);
    if ((PyObject *)type == w->object_type || type == &PyList_Type) {
        int members = (PyObject *)type == w->object_type;
        if (!members && PyList_GET_SIZE(value) >= w->long_array) {
            if (json_long_array(w, w->item_name, value, depth + 1) < 0)
                return FAIL;
            return emit(&w->s, K_CLOSE, name, Py_None, depth, node);
        }
        JsonFrame frame = {value, 0, members, w->item, depth + 1, name, node, depth, 1};
        return json_push(w, frame);
    }
    PyObject *text = value;
    if (value == Py_True)
        text = w->true_text;
    else if (value == Py_False)
        text = w->false_text;
    else if (value == Py_None || (PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) == 0))
        text = NULL;
    if (text != NULL && emit(&w->s, K_TEXT, -1, text, depth + 1, w->s.next_node++) < 0)
        return FAIL;
    return emit(&w->s, K_CLOSE, name, Py_None, depth, node);
}

static int json_walk(JsonWalk *w)
{
    while (w->used > 0) {
        JsonFrame *top = &w->frames[w->used - 1];
        if (top->next >= PyList_GET_SIZE(top->seq)) {
            JsonFrame done = *top;
            w->used--;
            if (done.close && emit(&w->s, K_CLOSE, done.close_name, Py_None, done.close_depth,
                                   done.close_node) < 0)
                return FAIL;
            continue;
        }
        PyObject *item = PyList_GET_ITEM(top->seq, top->next++);
        int depth = top->depth;
        if (!top->members) {
            if (json_element(w, top->item, item, depth) < 0)
                return FAIL;
            continue;
        }
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "json_events: an object's items are (key, value)");
            return FAIL;
        }
        PyObject *key = PyTuple_GET_ITEM(item, 0), *member = PyTuple_GET_ITEM(item, 1);
        long long name = symbol_id(w->s.symbols, key);
        if (name < 0)
            return FAIL;
        if (Py_TYPE(member) != &PyList_Type) {
            if (json_element(w, name, member, depth) < 0)
                return FAIL;
        } else if (PyList_GET_SIZE(member) >= w->long_array) {
            if (json_long_array(w, key, member, depth) < 0)
                return FAIL;
        } else {
            JsonFrame frame = {member, 0, 0, name, depth, -1, -1, 0, 0};
            if (json_push(w, frame) < 0)
                return FAIL;
        }
    }
    return OK;
}

static PyObject *json_events(PyObject *module, PyObject *args)
{
    (void)module;
    JsonWalk w;
    memset(&w, 0, sizeof w);
    PyObject *value, *root, *result = NULL;
    long long doc;
    int depth;
    if (!PyArg_ParseTuple(args, "OOiLLO!O!lOOOn:json_events", &value, &root, &depth, &doc,
                          &w.s.next_node, &PyTuple_Type, &w.columns, &PyDict_Type, &w.s.symbols,
                          &w.s.max_depth, &w.object_type, &w.too_deep, &w.long_items,
                          &w.long_array))
        return NULL;
    if (PyTuple_GET_SIZE(w.columns) != 7 || !PyList_Check(PyTuple_GET_ITEM(w.columns, 3))) {
        PyErr_SetString(PyExc_TypeError,
                        "columns: docs, kinds, names, values (a list), depths, nodes, item name");
        return NULL;
    }
    w.s.values = PyTuple_GET_ITEM(w.columns, 3);
    w.item_name = PyTuple_GET_ITEM(w.columns, 6);
    w.s.doc = doc;
    w.true_text = PyUnicode_InternFromString("true");
    w.false_text = PyUnicode_InternFromString("false");
    if (w.true_text == NULL || w.false_text == NULL)
        goto out;
    long long name = symbol_id(w.s.symbols, root);
    w.item = symbol_id(w.s.symbols, w.item_name);
    if (name < 0 || w.item < 0)
        goto out;
    if (json_element(&w, name, value, depth) == OK && json_walk(&w) == OK)
        result = PyLong_FromLongLong(w.s.next_node);
out:
    if (flush_columns(&w.s, w.columns) < 0)
        Py_CLEAR(result);
    PyMem_Free(w.s.kinds.data);
    PyMem_Free(w.s.names.data);
    PyMem_Free(w.s.depths.data);
    PyMem_Free(w.s.nodes.data);
    PyMem_Free(w.frames);
    Py_XDECREF(w.true_text);
    Py_XDECREF(w.false_text);
    return result;
}

/* ----- mapped: the batch's values at some positions, looked up in a dict ----- */

/* whether every int64 position (``at``: a buffer of them) is an index of ``size`` values;
 * else an IndexError naming ``what`` */
static int positions_in(const Py_buffer *at, Py_ssize_t size, const char *what)
{
    if (at->len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "%s: positions are not int64", what);
        return 0;
    }
    const int64_t *position = at->buf;
    for (Py_ssize_t i = 0; i < at->len / (Py_ssize_t)sizeof(int64_t); i++) {
        if (position[i] < 0 || position[i] >= size) {
            PyErr_Format(PyExc_IndexError, "%s: a position outside the values", what);
            return 0;
        }
    }
    return 1;
}

/* mapped(values, positions, table, missing) -> bytearray of int64: table[values[p]] (an int)
 * for each int64 position p, ``missing`` where values[p] is not a key */
static PyObject *mapped(PyObject *module, PyObject *args)
{
    PyObject *values, *table, *out = NULL;
    Py_buffer at;
    long long missing;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!y*O!L:mapped", &PyList_Type, &values, &at, &PyDict_Type,
                          &table, &missing))
        return NULL;
    if (!positions_in(&at, PyList_GET_SIZE(values), "mapped"))
        goto done;
    Py_ssize_t n = at.len / (Py_ssize_t)sizeof(int64_t);
    out = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL)
        goto done;
    const int64_t *position = at.buf;
    int64_t *code = (int64_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *found = PyDict_GetItemWithError(table, PyList_GET_ITEM(values, position[i]));
        if (found == NULL) {
            if (PyErr_Occurred()) {
                Py_CLEAR(out);
                goto done;
            }
            code[i] = missing;
            continue;
        }
        long long x = PyLong_AsLongLong(found);
        if (x == -1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            goto done;
        }
        code[i] = x;
    }
done:
    PyBuffer_Release(&at);
    return out;
}

/* ----- number_places: where the batch's values fall among sorted numbers ----- */

/* a str of ASCII digits, signs, '.', 'e' or 'E' only, read as Python's float() reads it
 * (PyOS_string_to_double is float()'s core; with no space or '_' to strip, the same):
 * 1 and *x when it is a finite number, 0 when it is not one or not such a str (the
 * caller's general way reads it then), -1 on an error */
static int plain_number(PyObject *value, double *x)
{
    if (!PyUnicode_CheckExact(value) || !PyUnicode_IS_ASCII(value))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    const char *text = (const char *)PyUnicode_DATA(value);
    if (n == 0 || n > 64)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = text[i];
        if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
            return 0;
    }
    char *end;
    double number = PyOS_string_to_double(text, &end, NULL);
    if (number == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    if (end != text + n || !isfinite(number))
        return 0;
    *x = number;
    return 1;
}

static Py_ssize_t lower_bound(const double *sorted, Py_ssize_t n, double x)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (sorted[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* number_places(values, positions, ordered, equal) -> bytearray of int64: for each int64
 * position p whose value reads as a number x (plain_number), its place
 * ((b * 2 + o) * (len(equal) + 1) + e + 1): b how many of the sorted distinct float64s
 * ``ordered`` are below x, o whether one equals it, e the index of the one of ``equal``
 * that equals it (-1: none); -1 for the others */
static PyObject *number_places(PyObject *module, PyObject *args)
{
    PyObject *values, *out = NULL;
    Py_buffer at, ordered, equal;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!y*y*y*:number_places", &PyList_Type, &values, &at, &ordered,
                          &equal))
        return NULL;
    Py_ssize_t n = at.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t n_ordered = ordered.len / (Py_ssize_t)sizeof(double);
    Py_ssize_t n_equal = equal.len / (Py_ssize_t)sizeof(double);
    if (ordered.len % (Py_ssize_t)sizeof(double) || equal.len % (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "number_places: numbers are not float64");
        goto done;
    }
    if (!positions_in(&at, PyList_GET_SIZE(values), "number_places"))
        goto done;
    out = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL)
        goto done;
    const int64_t *position = at.buf;
    const double *sorted = ordered.buf, *equals = equal.buf;
    int64_t *place = (int64_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        double x;
        int r = plain_number(PyList_GET_ITEM(values, position[i]), &x);
        if (r < 0) {
            Py_CLEAR(out);
            goto done;
        }
        if (r == 0) {
            place[i] = -1;
            continue;
        }
        Py_ssize_t b = lower_bound(sorted, n_ordered, x);
        int o = b < n_ordered && sorted[b] == x;
        Py_ssize_t e = lower_bound(equals, n_equal, x);
        e = e < n_equal && equals[e] == x ? e : -1;
        place[i] = (int64_t)((b * 2 + o) * (n_equal + 1) + e + 1);
    }
done:
    PyBuffer_Release(&at);
    PyBuffer_Release(&ordered);
    PyBuffer_Release(&equal);
    return out;
}

/* ----- json_lines: rows written as JSON Lines (xcep/commands.py, _RowWriter) ----- */

/* A growing UTF-8 buffer. */
typedef struct {
    char *data;
    Py_ssize_t size, cap;
} Out;

static int out_put(Out *o, const char *bytes, Py_ssize_t n)
{
    if (o->size + n > o->cap) {
        Py_ssize_t cap = o->cap ? o->cap : 4096;
        while (cap < o->size + n)
            cap *= 2;
        char *data = PyMem_Realloc(o->data, (size_t)cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->data = data;
        o->cap = cap;
    }
    memcpy(o->data + o->size, bytes, (size_t)n);
    o->size += n;
    return 0;
}

/* a str as json.dumps(ensure_ascii=False) writes it: '"', '\\' and the control characters
 * escaped, the rest as it is; 1 when it cannot be written here (a lone surrogate) */
static int out_string(Out *o, PyObject *text)
{
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    if (utf8 == NULL) {
        PyErr_Clear();
        return 1;
    }
    static const char hex[] = "0123456789abcdef";
    if (out_put(o, "\"", 1) < 0)
        return -1;
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        char escape[6] = {'\\', 0, 0, 0, 0, 0};
        Py_ssize_t size = 2;
        switch (c) {
        case '"': escape[1] = '"'; break;
        case '\\': escape[1] = '\\'; break;
        case '\n': escape[1] = 'n'; break;
        case '\r': escape[1] = 'r'; break;
        case '\t': escape[1] = 't'; break;
        case '\b': escape[1] = 'b'; break;
        case '\f': escape[1] = 'f'; break;
        default:
            escape[1] = 'u';
            escape[2] = escape[3] = '0';
            escape[4] = hex[c >> 4];
            escape[5] = hex[c & 15];
            size = 6;
        }
        if (out_put(o, utf8 + start, i - start) < 0 || out_put(o, escape, size) < 0)
            return -1;
        start = i + 1;
    }
    if (out_put(o, utf8 + start, n - start) < 0 || out_put(o, "\"", 1) < 0)
        return -1;
    return 0;
}

/* an ASCII str (a number's repr) as it is */
static int out_ascii(Out *o, PyObject *text)
{
    if (text == NULL)
        return -1;
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    int r = utf8 == NULL ? -1 : out_put(o, utf8, n);
    Py_DECREF(text);
    return r;
}

/* one JSON value: 0 written, 1 not a value written here (the row is left to the
 * fallback), -1 an error */
static int out_value(Out *o, PyObject *v, int depth)
{
    if (PyUnicode_CheckExact(v))
        return out_string(o, v);
    if (v == Py_None)
        return out_put(o, "null", 4);
    if (v == Py_True)
        return out_put(o, "true", 4);
    if (v == Py_False)
        return out_put(o, "false", 5);
    if (PyLong_CheckExact(v))
        return out_ascii(o, PyObject_Repr(v));
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (x != x)
            return out_put(o, "NaN", 3);
        if (x == Py_HUGE_VAL)
            return out_put(o, "Infinity", 8);
        if (x == -Py_HUGE_VAL)
            return out_put(o, "-Infinity", 9);
        return out_ascii(o, PyObject_Repr(v));
    }
    if ((PyList_CheckExact(v) || PyTuple_CheckExact(v)) && depth < 64) {
        PyObject *items = PySequence_Fast(v, "");
        if (items == NULL)
            return -1;
        int r = out_put(o, "[", 1);
        for (Py_ssize_t i = 0; r == 0 && i < PySequence_Fast_GET_SIZE(items); i++) {
            if (i > 0 && out_put(o, ",", 1) < 0)
                r = -1;
            else
                r = out_value(o, PySequence_Fast_GET_ITEM(items, i), depth + 1);
        }
        Py_DECREF(items);
        return r != 0 ? r : out_put(o, "]", 1);
    }
    return 1;
}

/* json_lines(values, firsts, fallback) -> str */
static PyObject *json_lines(PyObject *module, PyObject *args)
{
    PyObject *values, *firsts, *fallback;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!OO:json_lines", &PyList_Type, &values, &firsts, &fallback))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (firsts != Py_None && (!PyList_Check(firsts) || PyList_GET_SIZE(firsts) != n)) {
        PyErr_SetString(PyExc_ValueError, "json_lines: firsts is not a list as long as values");
        return NULL;
    }
    Out o = {NULL, 0, 0};
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyList_GET_ITEM(values, i);
        Py_ssize_t mark = o.size;
        int r;
        if (firsts == Py_None) {
            r = out_value(&o, value, 0);
        } else { /* [first, *value] */
            PyObject *first = PyList_GET_ITEM(firsts, i);
            r = PyList_CheckExact(value) || PyTuple_CheckExact(value) ? out_put(&o, "[", 1) : 1;
            if (r == 0)
                r = out_value(&o, first, 0);
            for (Py_ssize_t k = 0; r == 0 && k < PySequence_Fast_GET_SIZE(value); k++) {
                r = out_put(&o, ",", 1);
                if (r == 0)
                    r = out_value(&o, PySequence_Fast_GET_ITEM(value, k), 1);
            }
            if (r == 0)
                r = out_put(&o, "]", 1);
        }
        if (r < 0)
            goto out;
        if (r > 0) { /* the fallback writes this row */
            o.size = mark;
            PyObject *line = firsts == Py_None
                ? PyObject_CallOneArg(fallback, value)
                : PyObject_CallFunctionObjArgs(fallback, value, PyList_GET_ITEM(firsts, i), NULL);
            if (line == NULL)
                goto out;
            /* (a lone surrogate passes through, as the fallback wrote it) */
            PyObject *bytes = PyUnicode_Check(line)
                ? PyUnicode_AsEncodedString(line, "utf-8", "surrogatepass") : NULL;
            Py_DECREF(line);
            if (bytes == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "json_lines: the fallback gave no str");
                goto out;
            }
            r = out_put(&o, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
            Py_DECREF(bytes);
            if (r < 0)
                goto out;
        }
        if (out_put(&o, "\n", 1) < 0)
            goto out;
    }
    result = PyUnicode_DecodeUTF8(o.data ? o.data : "", o.size, "surrogatepass");
out:
    PyMem_Free(o.data);
    return result;
}

/* id_columns(lines, first) -> (line numbers, ids, texts) of a block of "ID TEXT" lines
 * (idlines.filter_blocks, its reference): each line stripped of white space at both ends
 * (str.strip), blank lines and lines starting with '#' skipped, the rest cut at its first
 * run of white space (str.split(None, 1)), an id of decimal digits after an optional '-'
 * an int (idlines.parse_id); None where a line is None or has no text (Python says why). */
static PyObject *id_columns(PyObject *module, PyObject *args)
{
    PyObject *lines, *columns[3] = {NULL, NULL, NULL}, *result = NULL;
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "O!n:id_columns", &PyList_Type, &lines, &first))
        return NULL;
    for (int c = 0; c < 3; c++)
        if ((columns[c] = PyList_New(0)) == NULL)
            goto out;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(lines); k++) {
        PyObject *line = PyList_GET_ITEM(lines, k);
        if (!PyUnicode_Check(line)) {
            result = Py_NewRef(Py_None);
            goto out;
        }
        int kind = PyUnicode_KIND(line);
        const void *data = PyUnicode_DATA(line);
        Py_ssize_t start = 0, end = PyUnicode_GET_LENGTH(line);
        while (start < end && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start)))
            start++;
        while (end > start && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end - 1)))
            end--;
        if (start == end || PyUnicode_READ(kind, data, start) == '#')
            continue;
        Py_ssize_t cut = start;
        while (cut < end && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, cut)))
            cut++;
        Py_ssize_t text = cut;
        while (text < end && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, text)))
            text++;
        if (text == end) { /* an id alone */
            result = Py_NewRef(Py_None);
            goto out;
        }
        Py_ssize_t digit = start + (PyUnicode_READ(kind, data, start) == '-');
        int decimal = digit < cut;
        for (Py_ssize_t i = digit; i < cut && decimal; i++)
            decimal = Py_UNICODE_ISDECIMAL(PyUnicode_READ(kind, data, i));
        PyObject *id = PyUnicode_Substring(line, start, cut);
        if (id != NULL && decimal)
            Py_SETREF(id, PyLong_FromUnicodeObject(id, 10));
        PyObject *number = PyLong_FromSsize_t(first + k), *rest = PyUnicode_Substring(line, text, end);
        int failed = id == NULL || number == NULL || rest == NULL ||
                     PyList_Append(columns[0], number) < 0 || PyList_Append(columns[1], id) < 0 ||
                     PyList_Append(columns[2], rest) < 0;
        Py_XDECREF(id), Py_XDECREF(number), Py_XDECREF(rest);
        if (failed)
            goto out;
    }
    result = PyTuple_Pack(3, columns[0], columns[1], columns[2]);
out:
    for (int c = 0; c < 3; c++)
        Py_XDECREF(columns[c]);
    return result;
}

/* depth_facts(kinds, depths) -> (the largest depth, how many closes at depth 1): of a
 * batch's columns (bytes-like: uint8 kinds, int32 depths), for its stream's statistics and
 * the documents it ends (EventBatch.depth_facts). */
static PyObject *depth_facts(PyObject *module, PyObject *args)
{
    Py_buffer kinds, depths;
    if (!PyArg_ParseTuple(args, "y*y*:depth_facts", &kinds, &depths))
        return NULL;
    PyObject *result = NULL;
    if (depths.len != kinds.len * 4) {
        PyErr_SetString(PyExc_ValueError, "depth_facts: a uint8 kind and an int32 depth per event");
    } else {
        const uint8_t *kind = kinds.buf;
        const int32_t *depth = depths.buf;
        int32_t deepest = 0;
        Py_ssize_t roots = 0;
        for (Py_ssize_t i = 0; i < kinds.len; i++) {
            deepest = depth[i] > deepest ? depth[i] : deepest;
            roots += kind[i] == K_CLOSE && depth[i] == 1;
        }
        result = Py_BuildValue("(in)", deepest, roots);
    }
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&depths);
    return result;
}

static PyMethodDef methods[] = {
    {"id_columns", id_columns, METH_VARARGS,
     "id_columns(lines, first) -> (line numbers, ids, texts) of a block of ID TEXT lines, or "
     "None where one is not UTF-8 or has no text"},
    {"depth_facts", depth_facts, METH_VARARGS,
     "depth_facts(kinds, depths) -> (the largest depth, how many closes at depth 1) of a "
     "batch's columns"},
    {"scan", scan, METH_VARARGS,
     "scan(buffer, pos, final, phase, doc, next_node, columns, symbols, stack, parts, "
     "keep_whitespace, max_depth, max_attributes, namespaces=False) -> (status, pos, next_node, root_at)\n\n"
     "Events of one document from buffer[pos:] appended to the columns (arrays q B i, "
     "a list, arrays i q); stack: a bytearray of (node, name id) int64 pairs; see "
     "xcep/events/xml_source.py."},
    {"mapped", mapped, METH_VARARGS,
     "mapped(values, positions, table, missing) -> bytearray of int64\n\n"
     "table[values[p]] (an int) for each int64 position p, missing where values[p] is not a "
     "key."},
    {"number_places", number_places, METH_VARARGS,
     "number_places(values, positions, ordered, equal) -> bytearray of int64\n\n"
     "For each int64 position whose value reads as a number x (a str of ASCII digits, signs, "
     "'.', 'e', 'E', as float() reads it; finite), (b * 2 + o) * (len(equal) + 1) + e + 1: b "
     "how many of the sorted distinct float64s ordered are below x, o whether one equals it, e "
     "the index of the one of the sorted float64s equal that equals it (-1: none); -1 for the "
     "others."},
    {"json_lines", json_lines, METH_VARARGS,
     "json_lines(values, firsts, fallback) -> str\n\n"
     "Each value (firsts None) or [first, *value] as json.dumps(ensure_ascii=False, "
     "separators=(',', ':')) writes it, one line each, '\\n' after each; a row with what "
     "is not str, int, float, bool, None, list or tuple is fallback(value) (or "
     "fallback(value, first))."},
    {"json_events", json_events, METH_VARARGS,
     "json_events(value, name, depth, doc, node, columns, symbols, max_depth, object_type, "
     "too_deep, long_items, long_array) -> next node\n\n"
     "The events of the element `name` holding a decoded JSON value (json_source.emit_values) "
     "appended to the "
     "columns (arrays q B i, a list, arrays i q, then the name of array items); an array of "
     "long_array items or more goes to long_items(name, items, depth, node) -> next node."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tokenizer", "The compiled XML tokenizer of the XML event source.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tokenizer(void)
{
    init_classes();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "MORE", MORE) < 0 || PyModule_AddIntConstant(m, "DONE", DONE) < 0 ||
        PyModule_AddIntConstant(m, "HANDOVER", HANDOVER) < 0 ||
        PyModule_AddIntConstant(m, "PROLOG", PROLOG) < 0 ||
        PyModule_AddIntConstant(m, "LIMIT", LIMIT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

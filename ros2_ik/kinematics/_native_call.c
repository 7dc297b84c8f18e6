/* The C call path of the compiled FK and Jacobian for small calls (ros2_ik.kinematics.native).

   No kinematics here: a call checks q, allocates the answer and calls the Numba kernel's C
   entry point (_compiled_kernels.entry_points: the same compiled code as the Numba call path,
   so the same numbers). It exists because a Python call through Numba's dispatcher costs
   about 1 us of argument typing for the five arguments, more than a 7-DOF arm's FK.

   Built at run time by ros2_ik.kinematics.native with the system's C compiler against this
   Python's and NumPy's headers, cached on disk by the hash of this text and those versions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

/* (q, rows, nq, idata, len, fdata, len, max value, out, out's last two sizes) -> done */
typedef int32_t (*kernel_fn)(double *, int64_t, int64_t, int64_t *, int64_t, double *, int64_t,
                            double, double *, int64_t, int64_t);

#define CAPSULE "ros2_ik.native.call"

typedef struct {
    kernel_fn fn;
    PyObject *idata, *fdata;  /* kept alive by the record */
    int64_t nq, max_rows, max_out, release_rows, row_out, a, b;
    double max_value;
    int tail_nd;
    npy_intp tail[4];
} Rec;

static void rec_free(PyObject *cap) {
    Rec *r = (Rec *)PyCapsule_GetPointer(cap, CAPSULE);
    if (r != NULL) {
        Py_XDECREF(r->idata);
        Py_XDECREF(r->fdata);
        PyMem_Free(r);
    }
}

static int c_array(PyObject *o, int type) {
    return PyArray_CheckExact(o) && PyArray_TYPE((PyArrayObject *)o) == type &&
           PyArray_NDIM((PyArrayObject *)o) == 1 &&
           PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o) && PyArray_ISALIGNED((PyArrayObject *)o) &&
           !PyArray_ISBYTESWAPPED((PyArrayObject *)o);
}

/* make(address, idata, fdata, nq, max_value, tail, max_rows, max_out, release_rows) */
static PyObject *make(PyObject *self, PyObject *args) {
    unsigned long long addr;
    PyObject *io, *fo, *tail;
    long long nq, max_rows, max_out, release_rows;
    double max_value;
    if (!PyArg_ParseTuple(args, "KOOLdO!LLL", &addr, &io, &fo, &nq, &max_value, &PyTuple_Type,
                          &tail, &max_rows, &max_out, &release_rows))
        return NULL;
    if (!c_array(io, NPY_INT64) || !c_array(fo, NPY_FLOAT64)) {
        PyErr_SetString(PyExc_TypeError,
                        "make: idata must be a 1-D C-contiguous int64 array and fdata a 1-D "
                        "C-contiguous float64 array");
        return NULL;
    }
    Py_ssize_t nd = PyTuple_GET_SIZE(tail);
    if (addr == 0 || nq < 1 || nd < 2 || nd > 4) {
        PyErr_SetString(PyExc_ValueError,
                        "make: a non-zero address, nq >= 1 and a row shape of 2 to 4 sizes");
        return NULL;
    }
    Rec *r = PyMem_Calloc(1, sizeof(Rec));
    if (r == NULL)
        return PyErr_NoMemory();
    r->row_out = 1;
    for (Py_ssize_t k = 0; k < nd; k++) {
        r->tail[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(tail, k));
        if (r->tail[k] < 1) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "make: row sizes must be >= 1");
            PyMem_Free(r);
            return NULL;
        }
        r->row_out *= r->tail[k];
    }
    r->fn = (kernel_fn)(uintptr_t)addr;
    r->nq = nq;
    r->max_value = max_value;
    r->max_rows = max_rows;
    r->max_out = max_out;
    r->release_rows = release_rows;
    r->tail_nd = (int)nd;
    r->a = r->tail[nd - 2];
    r->b = r->tail[nd - 1];
    Py_INCREF(io);
    Py_INCREF(fo);
    r->idata = io;
    r->fdata = fo;
    PyObject *cap = PyCapsule_New(r, CAPSULE, rec_free);
    if (cap == NULL) {
        Py_DECREF(io);
        Py_DECREF(fo);
        PyMem_Free(r);
    }
    return cap;
}

/* call(rec, q): the answer (B, *tail), or None when q is not an aligned C-contiguous float64
   NumPy array of shape (nq,) or (B, nq) with 0 < B < max_rows and B * row <= max_out, or has a
   value the kernel refuses (the caller's general path then answers, or raises its error) */
static PyObject *call(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "call(rec, q) takes 2 arguments");
        return NULL;
    }
    Rec *r = (Rec *)PyCapsule_GetPointer(args[0], CAPSULE);
    if (r == NULL)
        return NULL;
    PyObject *qo = args[1];
    if (!PyArray_CheckExact(qo))
        Py_RETURN_NONE;
    PyArrayObject *q = (PyArrayObject *)qo;
    if (PyArray_TYPE(q) != NPY_FLOAT64 || !PyArray_IS_C_CONTIGUOUS(q) || !PyArray_ISALIGNED(q) ||
        PyArray_ISBYTESWAPPED(q))
        Py_RETURN_NONE;
    int nd = PyArray_NDIM(q);
    npy_intp *d = PyArray_DIMS(q);
    int64_t B;
    if (nd == 1 && d[0] == r->nq)
        B = 1;
    else if (nd == 2 && d[1] == r->nq && d[0] > 0 && d[0] < r->max_rows)
        B = d[0];
    else
        Py_RETURN_NONE;
    if (B * r->row_out > r->max_out)
        Py_RETURN_NONE;
    npy_intp dims[5];
    dims[0] = B;
    for (int k = 0; k < r->tail_nd; k++)
        dims[k + 1] = r->tail[k];
    PyObject *out = PyArray_SimpleNew(r->tail_nd + 1, dims, NPY_FLOAT64);
    if (out == NULL)
        return NULL;
    double *qp = (double *)PyArray_DATA(q);
    double *op = (double *)PyArray_DATA((PyArrayObject *)out);
    PyArrayObject *ia = (PyArrayObject *)r->idata, *fa = (PyArrayObject *)r->fdata;
    int64_t *ip = (int64_t *)PyArray_DATA(ia);
    double *fp = (double *)PyArray_DATA(fa);
    int64_t ni = PyArray_DIM(ia, 0), nf = PyArray_DIM(fa, 0);
    int32_t ok;
    if (B >= r->release_rows) {
        Py_BEGIN_ALLOW_THREADS  /* the caller's references keep q and the record alive */
        ok = r->fn(qp, B, r->nq, ip, ni, fp, nf, r->max_value, op, r->a, r->b);
        Py_END_ALLOW_THREADS
    } else {
        ok = r->fn(qp, B, r->nq, ip, ni, fp, nf, r->max_value, op, r->a, r->b);
    }
    if (!ok) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS,
     "make(address, idata, fdata, nq, max_value, tail, max_rows, max_out, release_rows) -> "
     "a record for call"},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL,
     "call(record, q) -> the kernel's answer (B, *tail), or None"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ros2_ik_native", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ros2_ik_native(void) {
    import_array();
    return PyModule_Create(&module);
}

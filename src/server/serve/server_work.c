/* A small pool of worker threads for the CPU work a request body costs
 * before it can be answered or submitted: JSON parsing, chat template
 * rendering, tokenizing (and /detokenize's decoding). Done on the HTTP
 * thread, a 7 MB prompt stalled every other client for over a second
 * (issue 19), and a 63 KB template render held /health for 0.8 s (issue
 * 48): every body comes here, however small; the loop only moves bytes.
 * The queue is bounded: SERVER_WORK_QUEUE large bodies waiting (more get
 * 429); small ones always queue (one per connection at most).
 *
 * A job's request is touched only on the HTTP thread: workers see its body
 * (moved out of evhttp's buffer) and write its results. The client may
 * leave while a worker holds the job: the connection's close callback, or
 * the sweep's look at its socket (server_work_check_gone), forgets the
 * request and sets the job's cancel flag, which the worker checks between
 * phases and the template render every few hundred steps; a drain or stop
 * cancels every job, so none outlives --drain-timeout. The finished job is
 * dropped.
 *
 * Not here: what preparing means per endpoint (server_prepare.c). */
#include "server/serve/serve.h"

#include <stdlib.h>
#include <string.h>

struct server_work {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    work_job *queue_head, *queue_tail; /* waiting for a worker */
    work_job *done;                    /* prepared, for the HTTP thread */
    size_t n_queued, n_large;          /* waiting; of them, larger than SERVER_SMALL_BODY */
    bool stop;
    work_job *held; /* HTTP thread: every job from submit to finish */
    pthread_t threads[SERVER_WORKERS];
    size_t n_threads;
    struct event *ev_done; /* the HTTP thread's: activated by a worker */
};

static void *worker_main(void *arg) {
    server_work *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && !w->queue_head)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop) break;
        work_job *j = w->queue_head;
        w->queue_head = j->next;
        if (!w->queue_head) w->queue_tail = NULL;
        w->n_queued--;
        w->n_large -= j->large;
        pthread_mutex_unlock(&w->mu);
        server_work_prepare(j);
        pthread_mutex_lock(&w->mu);
        j->next = w->done;
        w->done = j;
        event_active(w->ev_done, EV_READ, 0);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void held_add(server_work *w, work_job *j) {
    j->hprev = NULL;
    j->hnext = w->held;
    if (w->held) w->held->hprev = j;
    w->held = j;
}

static void held_remove(server_work *w, work_job *j) {
    if (j->hprev)
        j->hprev->hnext = j->hnext;
    else if (w->held == j)
        w->held = j->hnext;
    if (j->hnext) j->hnext->hprev = j->hprev;
    j->hprev = j->hnext = NULL;
}

/* The HTTP thread: every prepared job is finished (answered or submitted). */
static void on_done(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    server_work *w = s->work;
    pthread_mutex_lock(&w->mu);
    work_job *list = w->done;
    w->done = NULL;
    pthread_mutex_unlock(&w->mu);
    /* oldest first: the list was pushed newest first */
    work_job *rev = NULL;
    while (list) {
        work_job *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        work_job *n = rev->next;
        s->n_jobs--;
        held_remove(w, rev);
        server_work_detach(rev);
        server_work_finish(rev);
        rev = n;
    }
    server_maybe_finish_drain(s);
}

int server_work_create(server *s, tps_err *err) {
    server_work *w = calloc(1, sizeof *w);
    if (!w) return tps_fail(err, TPS_ENOMEM, "out of memory");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    s->work = w;
    if (!(w->ev_done = event_new(s->base, -1, EV_PERSIST, on_done, s)))
        return tps_fail(err, TPS_EIO, "cannot create the worker pool's event");
    for (size_t i = 0; i < SERVER_WORKERS; i++) {
        if (pthread_create(&w->threads[i], NULL, worker_main, w))
            return tps_fail(err, TPS_EIO, "cannot start a worker thread");
        w->n_threads++;
    }
    return 0;
}

/* The connection closed while a worker held its job. */
static void on_job_conn_close(struct evhttp_connection *conn, void *arg) {
    work_job *j = arg;
    /* as req_ctx's on_conn_close: a request evhttp detached is ours to free */
    if (j->req && !evhttp_request_get_connection(j->req)) evhttp_request_free(j->req);
    j->req = NULL;
    j->conn = NULL;
    atomic_store(&j->cancel, true);
}

bool server_work_submit(server *s, work_job *j) {
    server_work *w = s->work;
    pthread_mutex_lock(&w->mu);
    bool full = j->large && w->n_large >= SERVER_WORK_QUEUE;
    if (!full) {
        w->n_large += j->large;
        j->next = NULL;
        if (w->queue_tail)
            w->queue_tail->next = j;
        else
            w->queue_head = j;
        w->queue_tail = j;
        w->n_queued++;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (full) return false;
    s->n_jobs++;
    held_add(w, j);
    if (j->conn) evhttp_connection_set_closecb(j->conn, on_job_conn_close, j);
    return true;
}

/* Detaches a finished job from its connection before it is answered. */
void server_work_detach(work_job *j) {
    if (j->conn) evhttp_connection_set_closecb(j->conn, NULL, NULL);
    j->conn = NULL;
}

void server_work_cancel_all(server *s) {
    for (work_job *j = s->work ? s->work->held : NULL; j; j = j->hnext)
        atomic_store(&j->cancel, true);
}

void server_work_check_gone(server *s) {
    for (work_job *j = s->work ? s->work->held : NULL; j; j = j->hnext) {
        if (!j->conn || atomic_load(&j->cancel)) continue;
        evutil_socket_t fd;
        int here = server_conn_peek(j->conn, &fd);
        if (here > 0 || (here == 0 && server_conn_probe_eof(server_conn_of(s, j->req), fd)))
            continue;
        struct evhttp_connection *conn = j->conn;
        evhttp_connection_set_closecb(conn, NULL, NULL);
        atomic_store(&j->cancel, true);
        j->req = NULL; /* attached: freed with the connection */
        j->conn = NULL;
        evhttp_connection_free(conn);
    }
}

static void drop_all(work_job *list) {
    while (list) {
        work_job *n = list->next;
        server_work_detach(list);
        server_work_job_free(list);
        list = n;
    }
}

void server_work_free(server *s) {
    server_work *w = s->work;
    if (!w) return;
    server_work_cancel_all(s); /* a worker in a long render leaves it */
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i < w->n_threads; i++)
        pthread_join(w->threads[i], NULL);
    drop_all(w->queue_head);
    drop_all(w->done);
    if (w->ev_done) event_free(w->ev_done);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    s->work = NULL;
}

/* store_file.c - the files at the store's path (see store_int.h): what each is (device and
 * inode), the checks before SQLite opens them and while they are used, their modes, the faults
 * behind SQLite's errors, and saving what was committed when the files go away under a running
 * scheduler.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "store_int.h"
#include "util.h"

static const char *const file_suffix[FILE_COUNT_] = {"", "-wal", "-shm", ".lock"};

void store_file_path(const sl_store_t *s, int f, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", s->path, file_suffix[f]);
}

int store_same_file(const file_id_t *id, const struct stat *st)
{
    return id->dev == st->st_dev && id->ino == st->st_ino;
}

/* Notes the fault behind the connection's last error (the first one only: it is the cause,
 * what follows is its consequence). Errors that are not about the file (a constraint, a
 * programmer error) are no fault. */
void store_note_fault(sl_store_t *s, const char *what)
{
    if (s->db == NULL || s->fault != SL_STORE_FAULT_NONE)
        return;
    const char *msg = sqlite3_errmsg(s->db);
    switch (sqlite3_errcode(s->db) & 0xff) {
    case SQLITE_FULL:
        s->fault = SL_STORE_FAULT_FULL;
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the database %s is full: SQLite could not make it grow (%s: %s; a full disk, "
                 "a quota or a file size limit). The transaction was rolled back and its Kafka "
                 "offsets were not committed, so no job is lost: free space on its file system, "
                 "then start the scheduler again",
                 s->path, what, msg);
        break;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
        s->fault = SL_STORE_FAULT_IO;
        snprintf(s->fault_text, sizeof s->fault_text,
                 "a read or write of the database %s failed (%s: %s). The transaction was rolled "
                 "back and its Kafka offsets were not committed: check the disk (dmesg) and the "
                 "file before starting the scheduler again",
                 s->path, what, msg);
        break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        s->fault = SL_STORE_FAULT_CORRUPT;
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the database %s is corrupted (%s: %s). The transaction was rolled back and its "
                 "Kafka offsets were not committed. Stop using the file: restore it from a "
                 "backup, or move it away (with its -wal and -shm) to start with an empty store",
                 s->path, what, msg);
        break;
    default:
        break;
    }
}

/* Checks the path before SQLite opens it, and creates a missing database file mode 0600 (SQLite
 * gives the -wal and -shm the database's mode). Refuses a file that does not begin with a SQLite
 * header, and a -wal whose database is missing: SQLite would apply that log to a new, empty
 * file. Sets *created. */
sl_err_t store_prepare_file(sl_store_t *s, int *created, char *err, size_t errlen)
{
    char wal[PATH_CAP + 8];
    store_file_path(s, FILE_WAL, wal, sizeof wal);
    struct stat st;
    *created = 0;
    if (stat(s->path, &st) != 0) {
        struct stat ws;
        if (errno != ENOENT) {
            snprintf(err, errlen, "cannot open %s: %s", s->path, strerror(errno));
            return SL_EIO;
        }
        if (stat(wal, &ws) == 0 && ws.st_size > 0) {
            snprintf(err, errlen,
                     "%s is missing but its write-ahead log %s is there (%lld bytes of committed "
                     "transactions): the database was deleted or moved without its log. Put the "
                     "database back; or, to start with an empty store, move %s and %s-shm away",
                     s->path, wal, (long long)ws.st_size, wal, s->path);
            return SL_EDB;
        }
        int fd = open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf(err, errlen, "cannot create %s: %s", s->path, strerror(errno));
            return SL_EIO;
        }
        close(fd);
        *created = 1;
        return SL_OK;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is not a regular file", s->path);
        return SL_EIO;
    }
    if (st.st_size == 0)
        return SL_OK; /* SQLite takes an empty file for a new database */
    char head[100];
    ssize_t n = -1;
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = pread(fd, head, sizeof head, 0);
        /* No SQLite connection has the file open yet: closing this descriptor releases no
         * lock of SQLite's. */
        close(fd);
    }
    if (n < 0) {
        snprintf(err, errlen, "cannot read %s: %s", s->path, strerror(errno));
        return SL_EIO;
    }
    if (n < (ssize_t)sizeof head || memcmp(head, "SQLite format 3", 16) != 0) {
        snprintf(err, errlen,
                 "%s is corrupted or not a sluice database: it does not begin with a SQLite "
                 "header (%lld bytes). " CORRUPT_ADVICE,
                 s->path, (long long)st.st_size);
        return SL_EDB;
    }
    return SL_OK;
}

/* Makes the database, its -wal and its -shm readable and writable by their owner alone, with a
 * warning for each that was open to others. */
void store_restrict_modes(const sl_store_t *s)
{
    for (int f = FILE_DB; f <= FILE_SHM; f++) {
        char path[PATH_CAP + 8];
        struct stat st;
        store_file_path(s, f, path, sizeof path);
        if (stat(path, &st) != 0 || (st.st_mode & 0077) == 0)
            continue;
        if (chmod(path, 0600) == 0)
            sl_warn("%s was mode %04o, open to other users, and holds every tenant's prompts "
                    "and answers: its mode is now 0600",
                    path, (unsigned)(st.st_mode & 07777));
        else
            sl_warn("%s is mode %04o, open to other users, and cannot be changed to 0600: %s", path,
                    (unsigned)(st.st_mode & 07777), strerror(errno));
    }
}

/* PRAGMA quick_check on an existing file: every page and B-tree is sound (it does not check
 * that indexes match their tables; that is integrity_check, too slow for every start). */
sl_err_t store_check_pages(sl_store_t *s, char *err, size_t errlen)
{
    double t0 = sl_mono_ms();
    sqlite3_stmt *st = NULL;
    char found[256] = "";
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        snprintf(found, sizeof found, "%s", v != NULL ? (const char *)v : "?");
    } else if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT) {
        /* A header SQLite cannot use fails here, before any page is read. */
        snprintf(found, sizeof found, "%s", sqlite3_errmsg(s->db));
    } else {
        snprintf(err, errlen, "cannot read %s: %s", s->path, sqlite3_errmsg(s->db));
        sqlite3_finalize(st);
        return SL_EDB;
    }
    sqlite3_finalize(st);
    for (char *c = found; *c != '\0'; c++) {
        if (*c == '\n')
            *c = ' '; /* quick_check separates its findings by lines: the message is one */
    }
    if (strcmp(found, "ok") != 0) {
        snprintf(err, errlen,
                 "%s is corrupted or not a sluice database (quick_check: %s). " CORRUPT_ADVICE,
                 s->path, found);
        return SL_EDB;
    }
    double took_ms = sl_mono_ms() - t0;
    if (took_ms >= 1000)
        sl_info("%s: quick_check took %.1f s", s->path, took_ms / 1000);
    return SL_OK;
}

/* Records the device and inode of the database, -wal and -shm as they are now that SQLite has
 * them open, and of the lock file by its descriptor. */
sl_err_t store_note_identity(sl_store_t *s, char *err, size_t errlen)
{
    int moved = 0;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK)
        moved = 0;
    for (int f = FILE_DB; f <= FILE_SHM; f++) {
        char path[PATH_CAP + 8];
        struct stat st;
        store_file_path(s, f, path, sizeof path);
        if (stat(path, &st) == 0) {
            s->id[f] = (file_id_t){1, st.st_dev, st.st_ino};
        } else if (f == FILE_DB) {
            moved = 1;
        }
    }
    struct stat st;
    if (fstat(s->lock_fd, &st) == 0)
        s->id[FILE_LOCK] = (file_id_t){1, st.st_dev, st.st_ino};
    if (moved) {
        snprintf(err, errlen, "%s was deleted or replaced while it was being opened", s->path);
        return SL_EDB;
    }
    return SL_OK;
}

/* ---- the files at the path ----------------------------------------------------------------- */

/* fsyncs the directory holding path, so a link or rename in it survives a power loss. */
static void sync_dir_of(const char *path)
{
    char dir[PATH_CAP + 8];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Writes the connection's last committed state (the database as this connection sees it, its
 * -wal included) to a new file at path, mode 0600, synced. On failure the new file is removed
 * and why says what went wrong. */
static sl_err_t save_copy(sl_store_t *s, const char *path, char *why, size_t whylen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
        return SL_EIO;
    }
    close(fd);
    /* VACUUM INTO fills an empty file: it keeps the 0600 it was created with. */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "VACUUM INTO ?", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        snprintf(why, whylen, "cannot write %s: %s", path, sqlite3_errmsg(s->db));
        unlink(path);
        return SL_EDB;
    }
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        snprintf(why, whylen, "cannot sync %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(path);
        return SL_EIO;
    }
    close(fd);
    sync_dir_of(path);
    return SL_OK;
}

/* Removes the -wal and -shm at the path when they are this connection's: they belong to the
 * file it has open, which is no longer the one at the path, and SQLite would apply that log to
 * whatever database stands there next. Returns the suffix of one that is not ours (left alone),
 * or NULL. */
static const char *remove_our_sidecars(const sl_store_t *s)
{
    const char *foreign = NULL;
    for (int f = FILE_WAL; f <= FILE_SHM; f++) {
        char path[PATH_CAP + 8];
        struct stat st;
        store_file_path(s, f, path, sizeof path);
        if (stat(path, &st) != 0)
            continue;
        if (s->id[f].known && store_same_file(&s->id[f], &st))
            unlink(path);
        else if (foreign == NULL)
            foreign = file_suffix[f];
    }
    return foreign;
}

/* The database was deleted: its last committed state goes back to the path, so the next start
 * finds every job whose offsets were committed. The -wal and -shm left at the path are this
 * connection's, of the deleted file: they go first (remove_our_sidecars). Anything at the path
 * that is not ours is left alone, and the copy stays next to it. */
static void rescue_deleted(sl_store_t *s, int64_t now_ms, const char *what)
{
    char copy[PATH_CAP + 64], why[PATH_CAP + 256] = "";
    snprintf(copy, sizeof copy, "%s.rescue-%lld.tmp", s->path, (long long)now_ms);
    if (save_copy(s, copy, why, sizeof why) != SL_OK) {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "%s while the scheduler had it open, and its last committed state could not "
                 "be saved (%s). Offsets of the work since the deletion were not committed; "
                 "jobs committed before it are only in the deleted file",
                 what, why);
        return;
    }
    const char *blocker = remove_our_sidecars(s);
    if (blocker == NULL && link(copy, s->path) == 0) {
        unlink(copy);
        sync_dir_of(s->path);
        snprintf(s->fault_text, sizeof s->fault_text,
                 "%s while the scheduler had it open. Its last committed state was written back "
                 "to %s (mode 0600); the offsets of what came after were not committed, so "
                 "Kafka delivers that again and no job is lost. Start the scheduler again (stop "
                 "it first to retire a database: a file deleted while open is put back)",
                 what, s->path);
        return;
    }
    char kept[PATH_CAP + 64];
    snprintf(kept, sizeof kept, "%s.rescued-%lld", s->path, (long long)now_ms);
    if (rename(copy, kept) != 0)
        snprintf(kept, sizeof kept, "%s", copy);
    snprintf(s->fault_text, sizeof s->fault_text,
             "%s while the scheduler had it open, and another file now stands at %s%s. Its last "
             "committed state is saved in %s (the offsets of what came after were not "
             "committed): with the scheduler stopped, move that file to %s (without any -wal or "
             "-shm there) to keep every job",
             what, s->path, blocker != NULL ? blocker : "", kept, s->path);
}

/* The database at the path is another file now: the one this connection wrote is saved next to
 * it, and the replacement is left alone (it may be a backup put back on purpose), but for the
 * -wal and -shm of ours beside it (remove_our_sidecars). */
static void rescue_replaced(sl_store_t *s, int64_t now_ms)
{
    char kept[PATH_CAP + 64], why[PATH_CAP + 256] = "";
    snprintf(kept, sizeof kept, "%s.rescued-%lld", s->path, (long long)now_ms);
    if (save_copy(s, kept, why, sizeof why) != SL_OK) {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "%s was replaced by another file while the scheduler had it open, and the "
                 "scheduler's last committed state could not be saved (%s). Offsets of the work "
                 "since were not committed",
                 s->path, why);
        return;
    }
    remove_our_sidecars(s);
    snprintf(s->fault_text, sizeof s->fault_text,
             "%s was replaced by another file while the scheduler had it open. The scheduler's "
             "last committed state is saved in %s; the offsets of what came after were not "
             "committed. If the replacement was not meant, stop the scheduler and move %s to %s "
             "(without the -wal and -shm there) to keep every job",
             s->path, kept, kept, s->path);
}

/* The -wal was deleted or replaced and the database is in place: the transactions in this
 * connection's log are checkpointed into the database, so the next start has them without it. */
static void rescue_wal(sl_store_t *s, const char *what)
{
    int64_t busy = -1; /* the first of the checkpoint's three columns */
    int rc = store_query_int(s, "PRAGMA wal_checkpoint(TRUNCATE)", &busy);
    if (rc == SQLITE_OK && busy == 0) {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the write-ahead log %s-wal %s while the scheduler had it open. Its committed "
                 "transactions were checkpointed into %s, and the offsets of what came after "
                 "were not committed, so no job is lost: start the scheduler again",
                 s->path, what, s->path);
        return;
    }
    snprintf(s->fault_text, sizeof s->fault_text,
             "the write-ahead log %s-wal %s while the scheduler had it open, and its committed "
             "transactions could not be checkpointed into %s (%s): the offsets of what came "
             "after were not committed, but jobs committed since the last checkpoint may be lost",
             s->path, what, s->path, rc == SQLITE_OK ? "busy" : sqlite3_errmsg(s->db));
}

/* How the path of file f no longer leads to the file this store has open: NULL when it does,
 * else "was deleted" or "was replaced". */
static const char *file_moved(const sl_store_t *s, int f)
{
    char path[PATH_CAP + 8];
    struct stat st;
    store_file_path(s, f, path, sizeof path);
    if (!s->id[f].known)
        return NULL;
    if (stat(path, &st) != 0)
        return errno == ENOENT || errno == ENOTDIR ? "was deleted" : NULL;
    return store_same_file(&s->id[f], &st) ? NULL : "was replaced";
}

sl_err_t sl_store_check(sl_store_t *s)
{
    if (s->fault != SL_STORE_FAULT_NONE)
        return SL_EDB;
    /* SQLite compares the path with the descriptor it writes (SQLITE_FCNTL_HAS_MOVED: deleted,
     * renamed or replaced), and the device and inode noted at open catch the rest. The link
     * count of the open file needs no check of its own: a file with none has no path, and its
     * path then fails or leads to another inode. */
    int moved = 0;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK)
        moved = 0;
    const char *db_how = file_moved(s, FILE_DB);
    if (moved && db_how == NULL)
        db_how = "was deleted or replaced";
    const char *wal_how = db_how == NULL ? file_moved(s, FILE_WAL) : NULL;
    const char *lock_how = NULL;
    struct stat st;
    if (db_how == NULL && wal_how == NULL) {
        if (fstat(s->lock_fd, &st) == 0 && st.st_nlink == 0)
            lock_how = "was deleted";
        else
            lock_how = file_moved(s, FILE_LOCK);
    }
    if (db_how == NULL && wal_how == NULL && lock_how == NULL)
        return SL_OK;
    s->fault = SL_STORE_FAULT_MOVED;
    int64_t now_ms = sl_now_ms();
    if (db_how != NULL) {
        char what[PATH_CAP + 64];
        snprintf(what, sizeof what, "the database %s %s", s->path, db_how);
        if (stat(s->path, &st) != 0)
            rescue_deleted(s, now_ms, what);
        else
            rescue_replaced(s, now_ms);
    } else if (wal_how != NULL) {
        rescue_wal(s, wal_how);
    } else {
        snprintf(s->fault_text, sizeof s->fault_text,
                 "the lock file %s.lock %s while the scheduler held it, so a second scheduler "
                 "could open %s at the same time; the scheduler stops (the database is intact, "
                 "and the offsets of the last work were not committed): start it again",
                 s->path, lock_how, s->path);
    }
    return SL_EDB;
}

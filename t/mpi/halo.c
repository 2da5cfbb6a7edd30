/* halo: a 1-D Jacobi relaxation split among the ranks, each step a
   compute sweep over the rank's cells and a halo exchange with both
   neighbours (the shape of most stencil codes). Rank 0 prints the time of
   the steps alone (MPI_Init excluded) and a checksum that does not depend
   on the number of ranks.
     mpi-halo [CELLS [STEPS]]     default 4000000 cells, 200 steps */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long cells = argc > 1 ? atol(argv[1]) : 4000000;
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    if (cells < size || steps < 1) {
        if (rank == 0)
            fprintf(stderr, "mpi-halo: expected CELLS >= ranks and STEPS >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long first = cells * rank / size, n = cells * (rank + 1) / size - first;
    /* u[0] and u[n+1] are the halo cells: the neighbours' edges, or the
       fixed boundary (1.0 on the left, 0.0 on the right). */
    double* u = calloc((size_t)n + 2, sizeof *u);
    double* v = calloc((size_t)n + 2, sizeof *v);
    if (!u || !v)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0)
        u[0] = v[0] = 1.0;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int s = 0; s < steps; s++) {
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[n + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (long i = 1; i <= n; i++)
            v[i] = 0.5 * (u[i - 1] + u[i + 1]);
        double* t = u;
        u = v;
        v = t;
    }
    double local = 0, sum = 0;
    for (long i = 1; i <= n; i++)
        local += u[i] * (double)(first + i);
    MPI_Reduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double elapsed = MPI_Wtime() - t0;
    if (rank == 0)
        printf("halo: ranks %d cells %ld steps %d time %.3f s checksum %.6e\n", size, cells, steps, elapsed, sum);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}

/* allreduce: sums a vector whose element i on rank r is r*1000+i, and
   checks every element against the closed form; prints a checksum. */
#include <mpi.h>
#include <stdio.h>

#define N 4096

int main(int argc, char** argv) {
    int rank, size;
    static double in[N], out[N];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < N; i++)
        in[i] = rank * 1000.0 + i;
    MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int bad = 0;
    double checksum = 0;
    for (int i = 0; i < N; i++) {
        double expected = 1000.0 * size * (size - 1) / 2 + (double)i * size;
        if (out[i] != expected)
            bad++;
        checksum += out[i];
    }
    int all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("allreduce: size %d checksum %.0f errors %d\n", size, checksum, all_bad);
    MPI_Finalize();
    return all_bad != 0;
}

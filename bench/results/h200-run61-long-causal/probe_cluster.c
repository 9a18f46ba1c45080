#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Can an OpenCL kernel on NVIDIA run as a cluster of two work-groups when its PTX carries
   .reqnctapercluster? Reads the cluster registers, a peer's __local through mapa, and a
   multicast bulk copy into both work-groups' __local. */
static const char *src =
"#define M \"// @sm90a@ \"\n"
"__kernel __attribute__((reqd_work_group_size(128,1,1))) void cl_probe(__global uint* out, __global const uint4* g) {\n"
"  __local uint x;\n"
"  __local ulong bar __attribute__((aligned(8)));\n"
"  __local uint4 bulk[64] __attribute__((aligned(128)));\n"
"  uint t = get_local_id(0), grp = get_group_id(0);\n"
"  uint rank=99, n=99, cid=99;\n"
"  asm volatile(M \"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(rank));\n"
"  asm volatile(M \"mov.u32 %0, %%cluster_nctarank;\" : \"=r\"(n));\n"
"  asm volatile(M \"mov.u32 %0, %%clusterid.x;\" : \"=r\"(cid));\n"
"  for (uint i=t;i<64;i+=128) bulk[i]=(uint4)(7777u);\n"
"  if (t==0) { x = 1000u + grp; asm volatile(M \"mbarrier.init.shared.b64 [%0], 1;\" :: \"r\"((uint)(size_t)&bar) : \"memory\"); }\n"
"  asm volatile(M \"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  uint peer = 0xFFFFFFFFu;\n"
"  if (n == 2) {\n"
"    asm volatile(M \"barrier.cluster.arrive.release.aligned;\" ::: \"memory\");\n"
"    asm volatile(M \"barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n"
"    uint ra=0; asm volatile(M \"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(ra) : \"r\"((uint)(size_t)&x), \"r\"(rank ^ 1u));\n"
"    asm volatile(M \"ld.shared::cluster.u32 %0, [%1];\" : \"=r\"(peer) : \"r\"(ra) : \"memory\");\n"
"    uint sbar=(uint)(size_t)&bar, sbulk=(uint)(size_t)bulk;\n"
"    if (t==0) asm volatile(M \"mbarrier.arrive.expect_tx.shared.b64 _, [%0], 1024;\" :: \"r\"(sbar) : \"memory\");\n"
"    if (t==0 && rank==0) { ushort mask = 3;\n"
"      asm volatile(M \"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], 1024, [%2], %3;\" :: \"r\"(sbulk), \"l\"(g + 64*cid), \"r\"(sbar), \"h\"(mask) : \"memory\"); }\n"
"    uint done=0; while(!done) { asm volatile(M \"{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0,1,0,p; }\" : \"=r\"(done) : \"r\"(sbar) : \"memory\"); }\n"
"    asm volatile(M \"barrier.cluster.arrive.release.aligned;\" ::: \"memory\");\n"
"    asm volatile(M \"barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n"
"  }\n"
"  if (t==0) { out[grp*8+0]=rank; out[grp*8+1]=n; out[grp*8+2]=cid; out[grp*8+3]=peer; out[grp*8+4]=bulk[0].x; out[grp*8+5]=bulk[63].w; }\n"
"}\n";
#define CK(e) do{cl_int _e=(e); if(_e!=CL_SUCCESS){fprintf(stderr,"%s:%d err %d\n",__FILE__,__LINE__,_e); exit(1);} }while(0)
static char *rewrite(const char *b, int cluster)
{
  char *nb = malloc(strlen(b)*2+4096), *w = nb; const char *r = b; int entry = 0;
  while (*r) {
    if (!strncmp(r, ".target sm_90", 13) && r[13] != 'a') { w += sprintf(w, ".target sm_90a"); r += 13; continue; }
    if (!strncmp(r, "// @sm90a@ ", 11)) { r += 11; continue; }
    if (!strncmp(r, ".entry", 6)) entry = 1;
    if (entry && *r == '{' && cluster) { w += sprintf(w, ".reqnctapercluster 2, 1, 1\n"); entry = 0; }
    *w++ = *r++;
  }
  *w = 0; return nb;
}
int main(int argc, char **argv){
  int cluster = argc > 1 ? atoi(argv[1]) : 1;
  cl_uint np; cl_platform_id ps[8]; CK(clGetPlatformIDs(8,ps,&np)); cl_device_id d=NULL;
  for (cl_uint i=0;i<np&&!d;i++) if (clGetDeviceIDs(ps[i],CL_DEVICE_TYPE_GPU,1,&d,NULL)!=CL_SUCCESS) d=NULL;
  if(!d){printf("no GPU\n");return 1;}
  cl_int e; cl_context ctx=clCreateContext(NULL,1,&d,NULL,NULL,&e); CK(e);
  cl_command_queue q=clCreateCommandQueue(ctx,d,0,&e); CK(e);
  cl_program pr=clCreateProgramWithSource(ctx,1,&src,NULL,&e); CK(e);
  static char log[65536]; size_t ls;
  e=clBuildProgram(pr,1,&d,"",NULL,NULL);
  clGetProgramBuildInfo(pr,d,CL_PROGRAM_BUILD_LOG,sizeof log,log,&ls); printf("stage1 rc=%d %.300s\n",e,log); CK(e);
  size_t bs; CK(clGetProgramInfo(pr,CL_PROGRAM_BINARY_SIZES,sizeof bs,&bs,NULL)); char* b=malloc(bs+1); CK(clGetProgramInfo(pr,CL_PROGRAM_BINARIES,sizeof b,&b,NULL)); b[bs]=0;
  char *nb = rewrite(b, cluster); size_t nbs = strlen(nb);
  { const char *en = strstr(nb, ".entry"); printf("entry:\n%.400s\n", en ? en : "(none)"); }
  const unsigned char* bins[1] = {(const unsigned char*)nb}; cl_int bst;
  pr = clCreateProgramWithBinary(ctx,1,&d,&nbs,bins,&bst,&e); printf("createWithBinary e=%d bst=%d\n",e,bst); CK(e);
  e=clBuildProgram(pr,1,&d,"-cl-nv-verbose",NULL,NULL);
  clGetProgramBuildInfo(pr,d,CL_PROGRAM_BUILD_LOG,sizeof log,log,&ls); printf("stage2 rc=%d log:%.800s\n",e,log);
  CK(e);
  cl_mem out=clCreateBuffer(ctx,CL_MEM_READ_WRITE,4*8*4,NULL,&e); CK(e);
  unsigned gv[1024]; for(int i=0;i<1024;i++) gv[i]=i;
  cl_mem g=clCreateBuffer(ctx,CL_MEM_READ_ONLY|CL_MEM_COPY_HOST_PTR,sizeof gv,gv,&e); CK(e);
  unsigned zero[32]; memset(zero, 0xEE, sizeof zero);
  CK(clEnqueueWriteBuffer(q,out,CL_TRUE,0,sizeof zero,zero,0,NULL,NULL));
  cl_kernel k=clCreateKernel(pr,"cl_probe",&e); CK(e); CK(clSetKernelArg(k,0,sizeof out,&out)); CK(clSetKernelArg(k,1,sizeof g,&g));
  size_t gs=4*128,l=128; e = clEnqueueNDRangeKernel(q,k,1,NULL,&gs,&l,0,NULL,NULL); printf("enqueue %d\n", e); CK(e);
  e = clFinish(q); printf("finish %d\n", e); CK(e);
  unsigned h[32]; CK(clEnqueueReadBuffer(q,out,CL_TRUE,0,sizeof h,h,0,NULL,NULL));
  for (int i=0;i<4;i++) printf("group %d: rank %u of %u, cluster %u, peer's x %u, bulk[0].x %u bulk[63].w %u\n", i, h[i*8], h[i*8+1], h[i*8+2], h[i*8+3], h[i*8+4], h[i*8+5]);
  return 0;
}

/* Does NVIDIA's OpenCL take setmaxnreg through an sm_90a PTX rewrite?
 * 384 work-items: warpgroup 0 gives registers back (dec 40), warpgroups 1-2
 * take more (inc 232); the entry gets .maxnreg 168.  The consumers keep
 * N_ACC floats live across a loop so that they need the registers. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#define N_ACC 176
static const char *src =
"#define N_ACC 176\n"
"__kernel __attribute__((reqd_work_group_size(384,1,1))) void k(__global float *out, int iters) {\n"
"  const int lid = get_local_id(0), wg = lid / 128, gid = get_global_id(0);\n"
"  if (wg == 0) { asm volatile(\"// @DEC@\" ::: \"memory\"); out[gid] = -1.0f; return; }\n"
"  asm volatile(\"// @INC@\" ::: \"memory\");\n"
"  float a[N_ACC];\n"
"  #pragma unroll\n"
"  for (int i = 0; i < N_ACC; ++i) a[i] = (float)(lid + i);\n"
"  for (int t = 0; t < iters; ++t) {\n"
"    #pragma unroll\n"
"    for (int i = 0; i < N_ACC; ++i) a[i] = fma(a[i], 0.5f, (float)((i + t) & 7));\n"
"  }\n"
"  float s = 0.0f;\n"
"  #pragma unroll\n"
"  for (int i = 0; i < N_ACC; ++i) s += a[i] * (float)(i + 1);\n"
"  out[gid] = s;\n"
"}\n";
#define CK(e) do{cl_int _e=(e); if(_e!=CL_SUCCESS){fprintf(stderr,"%s:%d err %d\n",__FILE__,__LINE__,_e); exit(1);} }while(0)
static float expect(int lid, int iters) {
  float s = 0.0f;
  for (int i = 0; i < N_ACC; ++i) {
    float a = (float)(lid + i);
    for (int t = 0; t < iters; ++t) a = fmaf(a, 0.5f, (float)((i + t) & 7));
    s += a * (float)(i + 1);
  }
  return s;
}
int main(int argc, char **argv) {
  const int patch = argc < 2 || strcmp(argv[1], "plain") != 0;
  cl_uint np; cl_platform_id ps[8]; CK(clGetPlatformIDs(8,ps,&np)); cl_device_id d=NULL;
  for (cl_uint i=0;i<np&&!d;i++) if (clGetDeviceIDs(ps[i],CL_DEVICE_TYPE_GPU,1,&d,NULL)!=CL_SUCCESS) d=NULL;
  if(!d){printf("no GPU\n");return 1;}
  cl_int e; cl_context ctx=clCreateContext(NULL,1,&d,NULL,NULL,&e); CK(e);
  cl_command_queue q=clCreateCommandQueue(ctx,d,0,&e); CK(e);
  cl_program pr=clCreateProgramWithSource(ctx,1,&src,NULL,&e); CK(e);
  static char log[65536]; size_t ls;
  e=clBuildProgram(pr,1,&d,"-cl-nv-verbose",NULL,NULL);
  clGetProgramBuildInfo(pr,d,CL_PROGRAM_BUILD_LOG,sizeof log,log,&ls); printf("stage1 rc=%d log: %.600s\n",e,log); CK(e);
  size_t bs; CK(clGetProgramInfo(pr,CL_PROGRAM_BINARY_SIZES,sizeof bs,&bs,NULL)); char* b=malloc(bs+1); CK(clGetProgramInfo(pr,CL_PROGRAM_BINARIES,sizeof b,&b,NULL)); b[bs]=0;
  char* nb = malloc(bs*2+4096); char* w = nb; const char* r = b;
  while (*r) {
    if (patch && !strncmp(r, ".target sm_90", 13) && r[13] != 'a') { w += sprintf(w, ".target sm_90a"); r += 13; continue; }
    if (patch && !strncmp(r, ".reqntid 384, 1, 1", 18)) { w += sprintf(w, ".reqntid 384, 1, 1\n.maxnreg 168"); r += 18; continue; }
    if (patch && !strncmp(r, "// @DEC@", 8)) { w += sprintf(w, "setmaxnreg.dec.sync.aligned.u32 40;"); r += 8; continue; }
    if (patch && !strncmp(r, "// @INC@", 8)) { w += sprintf(w, "setmaxnreg.inc.sync.aligned.u32 232;"); r += 8; continue; }
    *w++ = *r++;
  }
  *w = 0; size_t nbs = strlen(nb);
  { const char* t = strstr(nb, ".maxnreg"); printf("maxnreg line: %.14s\n", t ? t : "(none)"); }
  const unsigned char* bins[1] = {(const unsigned char*)nb}; cl_int bst;
  pr = clCreateProgramWithBinary(ctx,1,&d,&nbs,bins,&bst,&e); printf("createWithBinary e=%d bst=%d\n",e,bst); CK(e);
  e=clBuildProgram(pr,1,&d,"-cl-nv-verbose",NULL,NULL);
  clGetProgramBuildInfo(pr,d,CL_PROGRAM_BUILD_LOG,sizeof log,log,&ls); printf("stage2 rc=%d log: %.800s\n",e,log);
  CK(e);
  const int iters = 1000, groups = 264;
  cl_mem out=clCreateBuffer(ctx,CL_MEM_READ_WRITE,384*groups*4,NULL,&e); CK(e);
  cl_kernel k=clCreateKernel(pr,"k",&e); CK(e); CK(clSetKernelArg(k,0,sizeof out,&out)); CK(clSetKernelArg(k,1,sizeof iters,&iters));
  size_t gs=384*(size_t)groups,l=384; CK(clEnqueueNDRangeKernel(q,k,1,NULL,&gs,&l,0,NULL,NULL));
  float *h = malloc(384*(size_t)groups*4); CK(clEnqueueReadBuffer(q,out,CL_TRUE,0,384*(size_t)groups*4,h,0,NULL,NULL));
  int bad = 0;
  for (int g = 0; g < groups; ++g)
    for (int t = 0; t < 384; ++t) {
      const float want = t < 128 ? -1.0f : expect(t, iters), got = h[g * 384 + t];
      if (!(got == want || (got - want) * (got - want) <= 1e-8f * want * want)) { if (bad < 5) printf("bad g %d t %d: %g want %g\n", g, t, got, want); ++bad; }
    }
  printf("%s: %d of %d values wrong\n", patch ? "setmaxnreg" : "plain", bad, 384 * groups);
  return bad != 0;
}

"""The built-in profiles (checks/profiles/*.yaml) as YAML reads them, so that
loading one needs no PyYAML (checks/profiles/profile.py). Generated: do not edit;
after changing a profile file, run ``python -m dev.regenerate``."""

PROFILES = {'dgx-a100': {'extends': 'hgx-a100-8gpu',
              'description': 'DGX/HGX A100 8-GPU (SXM4, 6 NVSwitches, 8x ConnectX-6 HDR)',
              'dmi_products': ['DGXA100', 'DGX A100'],
              'compute_hcas': 8,
              'hca_rate_gbps': 200,
              'hca_link_layer': 'InfiniBand',
              'nic_pcie_gen': 4,
              'nic_pcie_width': 16,
              'gpu_nic_distance': ['PIX', 'PXB'],
              'qualify': {'allreduce': {'unit': 'GB/s',
                                        'expected': 231.58,
                                        'floor': 228,
                                        'source': 'Azure guide ND_A100_v4 231.58 @ 8 '
                                                  'GiB; floor AzNHC conf/nd96asr_v4.conf '
                                                  '228'},
                          'allreduce_net': {'unit': 'GB/s',
                                            'floor': 18,
                                            'source': 'AzNHC '
                                                      'check_nccl_allreduce_ib_loopback '
                                                      '18.0 (NDv4, P2P/SHM disabled)'},
                          'h2d': {'unit': 'GB/s',
                                  'expected': 26.28,
                                  'floor': 21,
                                  'source': 'Azure guide ND_A100_v4 26.28; floor AzNHC '
                                            'check_gpu_bw 21'},
                          'd2h': {'unit': 'GB/s',
                                  'floor': 21,
                                  'source': 'AzNHC check_gpu_bw 21 235'},
                          'd2d': {'unit': 'GB/s',
                                  'floor': 235,
                                  'source': 'AzNHC check_gpu_bw 21 235 '
                                            '(device_to_device_memcpy_read_ce)'},
                          'hbm': {'unit': 'GB/s',
                                  'expected': 805,
                                  'floor': 586.5,
                                  'source': 'copy rate: half of read+write figures, as '
                                            "nvbandwidth's copy rate counts each byte "
                                            'once (src/memcpy.cpp:483; '
                                            'NVIDIA/nvbandwidth#48): Azure guide '
                                            'BabelStream Copy 1.61 TB/s read+write -> '
                                            '805; floor DCGM diag-skus.yaml '
                                            'memory_bandwidth 1,173,000 MB/s read+write '
                                            '-> 586.5'},
                          'gpu_compute': {'unit': 'Gflop/s',
                                          'expected': 16900,
                                          'source': 'gpu_burn doubles+tensor cores '
                                                    '16.9-17.2 TFLOP/s per '
                                                    'A100-SXM4-80GB '
                                                    '(data/real/active/06)'},
                          'nic': {'unit': 'Gb/s',
                                  'expected': 200,
                                  'floor': 180,
                                  'source': 'HDR line rate 200 Gb/s; floor AzNHC '
                                            'nd96asr_v4.conf check_ib_bw_gdr 180'},
                          'pairs': {'unit': 'GB/s',
                                    'expected': 182.8,
                                    'source': '2 x 8x A100, HDR: 182.80 GB/s at 1 GiB '
                                              '(GCM pairwise fixture, outputs/02); 24 '
                                              'GB/s per 200G NIC (nccl-tests#119, '
                                              'sjeaugey)'},
                          'rails': {'unit': 'Gb/s',
                                    'expected': 200,
                                    'floor': 180,
                                    'source': 'HDR 200 Gb/s rail to rail; floor 90 % of '
                                              'the port link speed '
                                              '(Mellanox/ngc_multinode_perf)'}}},
 'dgx-b200': {'extends': 'hgx-b200-8gpu',
              'description': 'DGX/HGX B200 8-GPU (2 NVLink5 switches, 8x ConnectX-7 NDR)',
              'provisional': True,
              'dmi_products': ['DGXB200', 'DGX B200'],
              'compute_hcas': 8,
              'hca_rate_gbps': 400,
              'hca_link_layer': 'InfiniBand',
              'nic_pcie_gen': 5,
              'nic_pcie_width': 16,
              'gpu_nic_distance': ['PIX', 'PXB'],
              'qualify': {'hbm': {'unit': 'GB/s',
                                  'floor': 2036.25,
                                  'source': 'copy rate: half of read+write figures, as '
                                            "nvbandwidth's copy rate counts each byte "
                                            'once (src/memcpy.cpp:483; '
                                            'NVIDIA/nvbandwidth#48): floor DCGM '
                                            'diag-skus.yaml memory_bandwidth 4,072,500 '
                                            'MB/s read+write (B200, lowest by device id) '
                                            '-> 2036.25'},
                          'nic': {'unit': 'Gb/s',
                                  'expected': 400,
                                  'floor': 360,
                                  'source': 'NDR 400 Gb/s; floor 90 % of link speed, '
                                            'NVIDIA NGC multinode certification '
                                            '(Mellanox/ngc_multinode_perf)'},
                          'pairs': {'unit': 'GB/s',
                                    'expected': 370,
                                    'source': 'ring ceiling 8 x 46-48 GB/s per NDR NIC '
                                              '(nccl-tests#290, AddyLaddy); a degraded '
                                              'pair measured 89.9 with RING '
                                              '(outputs/11)'},
                          'rails': {'unit': 'Gb/s',
                                    'expected': 400,
                                    'floor': 360,
                                    'source': 'NDR 400 Gb/s rail to rail; floor 90 % of '
                                              'the port link speed '
                                              '(Mellanox/ngc_multinode_perf)'}}},
 'dgx-h100': {'extends': 'hgx-h100-8gpu',
              'description': 'DGX/HGX H100 8-GPU (SXM5, 4 NVSwitches, 8x ConnectX-7 NDR)',
              'dmi_products': ['DGXH100', 'DGX H100'],
              'compute_hcas': 8,
              'hca_rate_gbps': 400,
              'hca_link_layer': 'InfiniBand',
              'nic_pcie_gen': 5,
              'nic_pcie_width': 16,
              'gpu_nic_distance': ['PIX', 'PXB'],
              'qualify': {'allreduce': {'unit': 'GB/s',
                                        'expected': 480,
                                        'floor': 460,
                                        'source': 'expected ~480 busbw with NVLS: '
                                                  'nccl-tests#212 (sjeaugey); floor: '
                                                  'AzNHC conf/nd96isr_h100_v5.conf '
                                                  'check_nccl_allreduce 460'},
                          'allreduce_ring': {'unit': 'GB/s',
                                             'expected': 370,
                                             'source': 'NCCL_ALGO=RING ~370 effective '
                                                       'NVLink: nccl-tests#212 '
                                                       '(sjeaugey), 368.76 in '
                                                       'nccl-tests#309'},
                          'h2d': {'unit': 'GB/s',
                                  'expected': 51,
                                  'floor': 48,
                                  'source': 'Azure AI-benchmarking-guide ND_H100_v5 (51, '
                                            'nvbandwidth host_to_device_memcpy_sm: a '
                                            'copy rate like the CE testcase run here); '
                                            'floor AzNHC check_gpu_bw 48'},
                          'd2h': {'unit': 'GB/s',
                                  'expected': 52,
                                  'floor': 48,
                                  'source': 'Azure AI-benchmarking-guide ND_H100_v5 (52, '
                                            'nvbandwidth device_to_host_memcpy_sm: a '
                                            'copy rate like the CE testcase run here); '
                                            'floor AzNHC check_gpu_bw 48'},
                          'd2d': {'unit': 'GB/s',
                                  'floor': 335,
                                  'source': 'AzNHC check_gpu_bw 48 335 '
                                            '(device_to_device_memcpy_read_ce)'},
                          'hbm': {'unit': 'GB/s',
                                  'expected': 1450,
                                  'floor': 952.5,
                                  'source': 'copy rate: half of read+write figures, as '
                                            "nvbandwidth's copy rate counts each byte "
                                            'once (src/memcpy.cpp:483; '
                                            'NVIDIA/nvbandwidth#48): Azure guide '
                                            'BabelStream Copy 2.90 TB/s read+write -> '
                                            '1450; floor DCGM diag-skus.yaml '
                                            'memory_bandwidth 1,905,000 MB/s read+write '
                                            '-> 952.5'},
                          'nic': {'unit': 'Gb/s',
                                  'expected': 400,
                                  'floor': 380,
                                  'source': 'NDR line rate 400 Gb/s; floor AzNHC '
                                            'azure_ib_write_bw_gdr.nhc nd96isr_h100_v5 '
                                            '380'},
                          'pairs': {'unit': 'GB/s',
                                    'expected': 370,
                                    'source': 'ring ceiling 8 x 46-48 GB/s per NDR NIC '
                                              '(nccl-tests#290, AddyLaddy); a degraded '
                                              'pair measured 89.9 with RING '
                                              '(outputs/11)'},
                          'rails': {'unit': 'Gb/s',
                                    'expected': 400,
                                    'floor': 360,
                                    'source': 'NDR 400 Gb/s rail to rail; floor 90 % of '
                                              'the port link speed '
                                              '(Mellanox/ngc_multinode_perf)'}}},
 'dgx-h200': {'extends': 'hgx-h200-8gpu',
              'provisional': True,
              'description': 'DGX/HGX H200 8-GPU (SXM5, 4 NVSwitches, 8x ConnectX-7 NDR)',
              'dmi_products': ['DGXH200', 'DGX H200'],
              'compute_hcas': 8,
              'hca_rate_gbps': 400,
              'hca_link_layer': 'InfiniBand',
              'nic_pcie_gen': 5,
              'nic_pcie_width': 16,
              'gpu_nic_distance': ['PIX', 'PXB'],
              'qualify': {'allreduce': {'unit': 'GB/s',
                                        'expected': 479.98,
                                        'floor': 431,
                                        'source': 'Azure guide ND_H200_v5 479.98 @ 8 '
                                                  'GiB; floor AzNHC '
                                                  'conf/nd96isr_h200_v5.conf 431'},
                          'h2d': {'unit': 'GB/s',
                                  'expected': 52,
                                  'floor': 48,
                                  'source': 'Azure guide ND_H200_v5 (52, nvbandwidth '
                                            'host_to_device_memcpy_sm: a copy rate like '
                                            'the CE testcase run here); floor AzNHC '
                                            'check_gpu_bw 48'},
                          'd2h': {'unit': 'GB/s',
                                  'expected': 52,
                                  'floor': 48,
                                  'source': 'Azure guide ND_H200_v5 (52, nvbandwidth '
                                            'device_to_host_memcpy_sm: a copy rate like '
                                            'the CE testcase run here); floor AzNHC '
                                            'check_gpu_bw 48'},
                          'd2d': {'unit': 'GB/s',
                                  'floor': 335,
                                  'source': 'AzNHC check_gpu_bw 48 335 '
                                            '(device_to_device_memcpy_read_ce)'},
                          'hbm': {'unit': 'GB/s',
                                  'expected': 2005,
                                  'floor': 1106.25,
                                  'source': 'copy rate: half of read+write figures, as '
                                            "nvbandwidth's copy rate counts each byte "
                                            'once (src/memcpy.cpp:483; '
                                            'NVIDIA/nvbandwidth#48): Azure guide '
                                            'BabelStream Copy 4.01 TB/s read+write -> '
                                            '2005; floor DCGM diag-skus.yaml id 233b '
                                            'memory_bandwidth 2,212,500 MB/s read+write '
                                            '-> 1106.25'},
                          'nic': {'unit': 'Gb/s',
                                  'expected': 400,
                                  'floor': 360,
                                  'source': 'NDR line rate 400 Gb/s; floor AzNHC '
                                            'azure_ib_write_bw_gdr.nhc nd96isr_h200_v5 '
                                            '360'},
                          'pairs': {'unit': 'GB/s',
                                    'expected': 370,
                                    'source': 'ring ceiling 8 x 46-48 GB/s per NDR NIC '
                                              '(nccl-tests#290, AddyLaddy); a degraded '
                                              'pair measured 89.9 with RING '
                                              '(outputs/11)'},
                          'rails': {'unit': 'Gb/s',
                                    'expected': 400,
                                    'floor': 360,
                                    'source': 'NDR 400 Gb/s rail to rail; floor 90 % of '
                                              'the port link speed '
                                              '(Mellanox/ngc_multinode_perf)'}}},
 'gb200-nvl72': {'description': 'GB200 NVL72 compute tray (4 GPUs, NVLink5 to switch '
                                'trays, 4x ConnectX-7 NDR)',
                 'dmi_products': ['GB200 NVL', 'P4972'],
                 'gpu_models': ['NVIDIA GB200'],
                 'gpu_count': 4,
                 'gpu_memory_gib': 186,
                 'gpu_pcie_gen': 5,
                 'gpu_pcie_width': 16,
                 'gpu_power_limit_w': 1200,
                 'nvlinks_per_gpu': 18,
                 'nvlink_version': 7,
                 'nvlink_link_speed_mbps': 53125,
                 'nvswitch': False,
                 'fabric_manager': False,
                 'nvl72': True,
                 'imex': True,
                 'imex_mode': 'auto',
                 'compute_hcas': 4,
                 'hca_rate_gbps': 400,
                 'hca_link_layer': 'InfiniBand',
                 'nic_pcie_gen': 5,
                 'nic_pcie_width': 16,
                 'gpu_nic_distance': ['SYS'],
                 'allreduce_busbw_gbps': 650,
                 'qualify': {'nic': {'unit': 'Gb/s',
                                     'expected': 400,
                                     'floor': 360,
                                     'source': '4x CX-7 NDR400 per tray (DGX GB200 '
                                               'SuperPOD RA as cited in '
                                               'ai-dynamo/aisimulate#192); floor 90 % of '
                                               'link speed (ngc_multinode_perf)'},
                             'pairs': {'unit': 'GB/s',
                                       'expected': 185,
                                       'source': '4 x CX-7 NDR400 per tray: 4 x 46-48 '
                                                 'GB/s per NIC (nccl-tests#290), MNNVL '
                                                 'off'},
                             'rails': {'unit': 'Gb/s',
                                       'expected': 400,
                                       'floor': 360,
                                       'source': 'NDR 400 Gb/s rail to rail; floor 90 % '
                                                 'of the port link speed '
                                                 '(Mellanox/ngc_multinode_perf)'},
                             'rack': {'unit': 'GB/s',
                                      'expected': 846.8,
                                      'source': 'full NVL72 rack, 72 GPUs, all_reduce '
                                                '846.82 in-place at 8 GiB '
                                                '(coreweave/nccl-tests PR #43, '
                                                'outputs/22 A)'}}},
 'gb300-nvl72': {'description': 'GB300 NVL72 compute tray (4 GPUs, NVLink5, 4x '
                                'ConnectX-8 XDR)',
                 'provisional': True,
                 'dmi_products': ['GB300 NVL'],
                 'gpu_models': ['NVIDIA GB300'],
                 'gpu_count': 4,
                 'gpu_memory_gib': 279,
                 'gpu_pcie_gen': 6,
                 'gpu_pcie_width': 16,
                 'gpu_power_limit_w': 1400,
                 'nvlinks_per_gpu': 18,
                 'nvlink_version': 7,
                 'nvlink_link_speed_mbps': 53125,
                 'nvswitch': False,
                 'fabric_manager': False,
                 'nvl72': True,
                 'imex': True,
                 'imex_mode': 'auto',
                 'gpu_burn_doubles': False,
                 'compute_hcas': 4,
                 'hca_rate_gbps': 800,
                 'hca_link_layer': 'InfiniBand',
                 'nic_pcie_gen': 6,
                 'nic_pcie_width': 16,
                 'gpu_nic_distance': ['PIX', 'PXB'],
                 'allreduce_busbw_gbps': 700,
                 'qualify': {'hbm': {'unit': 'GB/s',
                                     'floor': 2261.25,
                                     'source': 'copy rate: half of read+write figures, '
                                               "as nvbandwidth's copy rate counts each "
                                               'byte once (src/memcpy.cpp:483; '
                                               'NVIDIA/nvbandwidth#48): floor DCGM '
                                               'diag-skus.yaml memory_bandwidth '
                                               '4,522,500 MB/s read+write (id 31c2, '
                                               'GB300) -> 2261.25'},
                             'nic': {'unit': 'Gb/s',
                                     'expected': 800,
                                     'floor': 720,
                                     'source': 'XDR 800 Gb/s; floor 90 % of link speed '
                                               '(ngc_multinode_perf), derived, no '
                                               'measured XDR capture'},
                             'rails': {'unit': 'Gb/s',
                                       'expected': 800,
                                       'floor': 720,
                                       'source': 'XDR 800 Gb/s rail to rail; floor 90 % '
                                                 'of the port link speed '
                                                 '(ngc_multinode_perf), derived'},
                             'rack': {'unit': 'GB/s',
                                      'expected': 846.8,
                                      'source': 'GB200 NVL72 rack all_reduce 846.82 at 8 '
                                                'GiB (coreweave/nccl-tests PR #43); no '
                                                'GB300 capture found'}}},
 'generic': {'description': 'no hardware expectations (unknown or ambiguous platform)'},
 'h100-nvl': {'description': 'H100 NVL PCIe cards, NVLink-bridged in pairs (12 NVLink4 '
                             'links, no NVSwitch)',
              'provisional': True,
              'gpu_models': ['NVIDIA H100 NVL'],
              'gpu_pci_ids': ['0x2321'],
              'gpu_count': 8,
              'gpu_memory_gib': 94,
              'gpu_pcie_gen': 5,
              'gpu_pcie_width': 16,
              'gpu_power_limit_w': 400,
              'nvlinks_per_gpu': 12,
              'nvlink_version': 6,
              'nvlink_peers': 1,
              'nvswitch': False,
              'fabric_manager': False},
 'hgx-a100-8gpu': {'description': 'HGX A100 8-GPU baseboard (SXM4, 6 NVSwitches; the '
                                  "server's NICs come from a site profile)",
                   'gpu_models': ['NVIDIA A100-SXM4-80GB', 'NVIDIA A100-SXM4-40GB'],
                   'gpu_pci_ids': ['0x20b2', '0x20b0'],
                   'gpu_count': 8,
                   'gpu_memory_gib': 80,
                   'gpu_pcie_gen': 4,
                   'gpu_pcie_width': 16,
                   'gpu_power_limit_w': 400,
                   'nvlinks_per_gpu': 12,
                   'nvlink_version': 4,
                   'nvswitch': True,
                   'nvswitch_count': 6,
                   'fabric_manager': True,
                   'allreduce_busbw_gbps': 200},
 'hgx-b200-8gpu': {'description': 'HGX B200 8-GPU baseboard (2 NVLink5 switches managed '
                                  "through 4 ConnectX-7 functions; the server's NICs "
                                  'come from a site profile)',
                   'provisional': True,
                   'gpu_models': ['NVIDIA B200'],
                   'gpu_pci_ids': ['0x2901'],
                   'gpu_count': 8,
                   'gpu_memory_gib': 180,
                   'gpu_pcie_gen': 5,
                   'gpu_pcie_width': 16,
                   'gpu_power_limit_w': 1000,
                   'nvlinks_per_gpu': 18,
                   'nvlink_version': 7,
                   'nvswitch': True,
                   'nvswitch_mgmt_functions': 4,
                   'fabric_manager': True,
                   'allreduce_busbw_gbps': 650},
 'hgx-b300-8gpu': {'description': 'HGX/DGX B300 8-GPU baseboard (Blackwell Ultra, '
                                  "NVLink5 switches; the server's NICs come from a site "
                                  'profile)',
                   'provisional': True,
                   'gpu_models': ['NVIDIA B300 SXM6 AC'],
                   'gpu_pci_ids': ['0x3182'],
                   'gpu_count': 8,
                   'gpu_memory_gib': 279,
                   'gpu_pcie_gen': 6,
                   'gpu_pcie_width': 16,
                   'nvlinks_per_gpu': 18,
                   'nvlink_version': 7,
                   'nvswitch': True,
                   'fabric_manager': True,
                   'allreduce_busbw_gbps': 650,
                   'gpu_burn_doubles': False},
 'hgx-h100-8gpu': {'description': 'HGX H100 8-GPU baseboard (SXM5, 4 NVSwitches; the '
                                  "server's NICs come from a site profile)",
                   'gpu_models': ['NVIDIA H100 80GB HBM3'],
                   'gpu_pci_ids': ['0x2330'],
                   'gpu_count': 8,
                   'gpu_memory_gib': 80,
                   'gpu_pcie_gen': 5,
                   'gpu_pcie_width': 16,
                   'gpu_power_limit_w': 700,
                   'sm_clock_mhz': 1980,
                   'nvlinks_per_gpu': 18,
                   'nvlink_version': 6,
                   'nvswitch': True,
                   'nvswitch_count': 4,
                   'fabric_manager': True,
                   'allreduce_busbw_gbps': 360},
 'hgx-h100-pcie': {'description': 'H100 PCIe cards (no NVLink, no NVSwitch)',
                   'provisional': True,
                   'gpu_models': ['NVIDIA H100 PCIe'],
                   'gpu_pci_ids': ['0x2331'],
                   'gpu_count': 8,
                   'gpu_memory_gib': 80,
                   'gpu_pcie_gen': 5,
                   'gpu_pcie_width': 16,
                   'gpu_power_limit_w': 350,
                   'nvlinks_per_gpu': 0,
                   'nvswitch': False,
                   'fabric_manager': False},
 'hgx-h200-8gpu': {'description': 'HGX H200 8-GPU baseboard (SXM5, 4 NVSwitches; the '
                                  "server's NICs come from a site profile)",
                   'provisional': True,
                   'gpu_models': ['NVIDIA H200'],
                   'gpu_pci_ids': ['0x2335'],
                   'gpu_count': 8,
                   'gpu_memory_gib': 141,
                   'gpu_pcie_gen': 5,
                   'gpu_pcie_width': 16,
                   'gpu_power_limit_w': 700,
                   'sm_clock_mhz': 1980,
                   'nvlinks_per_gpu': 18,
                   'nvlink_version': 6,
                   'nvswitch': True,
                   'nvswitch_count': 4,
                   'fabric_manager': True,
                   'allreduce_busbw_gbps': 360}}
